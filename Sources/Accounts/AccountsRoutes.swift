import BookwormCore
import Foundation
import HTTPTypes
import Hummingbird

/// `/v1/auth/*`, `/v1/me*` and `/v1/users/{username}` (API.md, Accounts).
package struct AccountsRoutes: Sendable {
    package let service: AccountsService
    /// What a public profile shows besides the account: copies offered and trades completed,
    /// counted by rooms above this one, so the app wires it in.
    package let profileFacts: @Sendable (UUID) async throws -> ProfileFacts

    package init(service: AccountsService, profileFacts: @escaping @Sendable (UUID) async throws -> ProfileFacts) {
        self.service = service
        self.profileFacts = profileFacts
    }

    package func addRoutes(public group: RouterGroup<AppRequestContext>, optionallyAuthenticated: RouterGroup<AppRequestContext>,
                           authenticated: RouterGroup<AppRequestContext>) {
        group.post("auth/register", use: register)
        group.post("auth/login", use: login)
        optionallyAuthenticated.get("users/:username", use: publicProfile)
        authenticated.post("auth/logout", use: logout)
        authenticated.post("auth/logout-all", use: logoutAll)
        authenticated.get("me", use: me)
        authenticated.patch("me", use: updateMe)
        authenticated.post("me/password", use: changePassword)
    }

    @Sendable func register(_ request: Request, context: AppRequestContext) async throws -> Response {
        var request = request
        let body = try await request.decodeStrict(RegisterBody.self, context: context)
        var errors: [FieldError] = []
        let email = try collectFieldErrors(&errors) { try AccountValidation.email(body.email) }
        let username = try collectFieldErrors(&errors) { try AccountValidation.username(body.username) }
        let password = try collectFieldErrors(&errors) { try AccountValidation.password(body.password) }
        let displayName = try collectFieldErrors(&errors) { try AccountValidation.displayName(body.displayName) }
        guard errors.isEmpty, let email, let username, let password, let displayName else {
            throw AppError.validation(errors)
        }
        let (user, issued) = try await service.register(
            .init(email: email.display, emailNormalized: email.normalized, username: username,
                  displayName: displayName, password: password),
            clientAddress: context.clientAddress(request))
        return try AuthResponse(user: PrivateUser(user), token: issued.token, expiresAt: issued.expiresAt)
            .response(status: .created, for: request)
    }

    @Sendable func login(_ request: Request, context: AppRequestContext) async throws -> Response {
        var request = request
        let body = try await request.decodeStrict(LoginBody.self, context: context)
        guard !body.login.trimmingCharacters(in: .whitespaces).isEmpty, body.login.count <= 254 else {
            throw AppError.invalid("login", "must be an email address or username")
        }
        guard !body.password.isEmpty else { throw AppError.invalid("password", "is required") }
        let (user, issued) = try await service.login(login: body.login, password: body.password,
                                                     clientAddress: context.clientAddress(request))
        return try AuthResponse(user: PrivateUser(user), token: issued.token, expiresAt: issued.expiresAt).response(for: request)
    }

    @Sendable func logout(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await service.sessions.revoke(sessionID: context.requireSession().sessionID)
        return .noContent()
    }

    @Sendable func logoutAll(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await service.sessions.revokeAll(userID: context.requireSession().user.id)
        return .noContent()
    }

    @Sendable func me(_ request: Request, context: AppRequestContext) async throws -> Response {
        try .json(PrivateUser(context.requireSession().user), for: request)
    }

    @Sendable func updateMe(_ request: Request, context: AppRequestContext) async throws -> Response {
        let session = try context.requireSession()
        var request = request
        var body = try await request.decodeStrict(UpdateMeBody.self, context: context)
        if case .set(let value) = body.displayName { body.displayName = .set(try AccountValidation.displayName(value)) }
        if case .set(let value) = body.bio { body.bio = .set(try AccountValidation.bio(value)) }
        if let alerts = body.alerts, !["instant", "daily", "off"].contains(alerts) {
            throw AppError.invalid("alerts", "must be one of instant, daily, off")
        }
        if let unknown = body.push?.keys.sorted().first(where: { !PushPreference.kinds.contains($0) }) {
            throw AppError.invalid("push.\(unknown)", "unknown kind; the kinds are trades, alerts, contact")
        }
        guard let user = try await service.updateProfile(userID: session.user.id, displayName: body.displayName, bio: body.bio,
                                                               alerts: body.alerts, push: body.push ?? [:]) else {
            throw AppError.notFound("This account no longer exists")
        }
        service.sessions.forget(userID: user.id)
        return try .json(PrivateUser(user), for: request)
    }

    @Sendable func changePassword(_ request: Request, context: AppRequestContext) async throws -> Response {
        let session = try context.requireSession()
        var request = request
        let body = try await request.decodeStrict(ChangePasswordBody.self, context: context)
        let new = try AccountValidation.password(body.newPassword, field: "new_password")
        guard !body.currentPassword.isEmpty, body.currentPassword.utf8.count <= 1024 else {
            throw AppError.broken("current_password", "is incorrect")
        }
        try await service.changePassword(session: session, current: body.currentPassword, new: new)
        return .noContentAfterASecret()
    }

    @Sendable func publicProfile(_ request: Request, context: AppRequestContext) async throws -> Response {
        let username = try context.parameters.require("username")
        guard username.count <= 30, let user = try await service.users.findByUsername(username, visibleTo: context.session?.user.id),
              user.suspendedAt == nil else {
            throw AppError.notFound("No user named \(username.prefix(30))")
        }
        let profile = PublicUser(id: user.id, username: user.username, displayName: user.displayName,
                                 bio: user.bio, createdAt: user.createdAt,
                                 facts: try await profileFacts(user.id))
        return try .json(profile, for: request)
    }
}
