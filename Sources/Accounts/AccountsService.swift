import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// The account flows that span several stores: registration, login, password change.
/// HTTP shapes stay in `AccountsRoutes`; SQL stays in the stores.
package struct AccountsService: Sendable {
    package let client: Database
    package let users: AccountsStore
    package let sessions: SessionStore
    package let throttles: ThrottleStore
    let hasher: PasswordHasher
    package let mail: AccountMail
    package let policy: ThrottlePolicy
    package let logger: Logger

    package init(client: Database, users: AccountsStore, sessions: SessionStore, throttles: ThrottleStore, hasher: PasswordHasher, mail: AccountMail, policy: ThrottlePolicy, logger: Logger) {
        self.client = client
        self.users = users
        self.sessions = sessions
        self.throttles = throttles
        self.hasher = hasher
        self.mail = mail
        self.policy = policy
        self.logger = logger
    }

    /// `PATCH /v1/me`: one statement, in a transaction so that an `Idempotency-Key`'s answer is
    /// kept with it. Nil when the account is gone.
    func updateProfile(userID: UUID, displayName: FieldUpdate<String>, bio: FieldUpdate<String>, alerts: String?,
                       push: [String: Bool]) async throws -> UserRecord? {
        try await client.transaction(logger: logger) { connection in
            try await users.updateProfile(userID: userID, displayName: displayName, bio: bio, alerts: alerts, push: push, on: connection)
        }
    }

    package struct Registration: Sendable {
        let email: String
        let emailNormalized: String
        let username: String
        let displayName: String?
        let password: String
    }

    func register(_ input: Registration, clientAddress: String) async throws -> (UserRecord, SessionStore.Issued) {
        let ipKey = "register:ip:\(clientAddress)"
        if let wait = try await throttles.retryAfter(key: ipKey, limit: policy.registrations, window: policy.registrationWindow) {
            throw AppError.throttled(retryAfterSeconds: wait)
        }
        try await throttles.record(keys: [ipKey], window: policy.registrationWindow)
        let hash = try await hasher.hash(input.password)
        return try await client.transaction(logger: logger) { connection in
            let outcome = try await users.createUser(
                email: input.email, emailNormalized: input.emailNormalized, username: input.username,
                displayName: input.displayName, passwordHash: hash, at: sessions.clock.now(), on: connection)
            switch outcome {
            case .created(let user):
                try await mail.sendCode(to: user, on: connection)
                return (user, try await sessions.create(userID: user.id, on: connection))
            case .usernameTaken:
                throw AppError.conflict(code: "username-taken", detail: "This username is taken", field: "username")
            case .emailTaken:
                throw AppError.conflict(code: "email-taken", detail: "An account with this email exists", field: "email")
            }
        }
    }

    /// Unknown account and wrong password are indistinguishable: same error, and both pay for
    /// one Argon2 verification. Throttling is checked before the password, so a correct
    /// password does not get around it.
    package func login(login: String, password: String, clientAddress: String) async throws -> (UserRecord, SessionStore.Issued) {
        let user = try await users.findByLogin(login)
        let accountKey = "login:account:" + (user.map { $0.id.uuidString } ?? login.trimmingCharacters(in: .whitespaces).lowercased())
        let ipKey = "login:ip:\(clientAddress)"
        for key in [accountKey, ipKey] {
            if let wait = try await throttles.retryAfter(key: key, limit: policy.loginFailures, window: policy.loginWindow) {
                throw AppError.throttled(retryAfterSeconds: wait)
            }
        }
        let plausible = password.utf8.count <= 1024
        let matches = try await hasher.verify(plausible ? password : "", against: user?.passwordHash)
        guard let user, matches, plausible else {
            try await throttles.record(keys: [accountKey, ipKey], window: policy.loginWindow)
            throw Self.invalidCredentials
        }
        try await throttles.reset(key: accountKey)
        guard user.suspendedAt == nil else { throw Self.suspended }
        if let stored = user.passwordHash, hasher.needsRehash(stored) {
            let upgraded = try await hasher.hash(password)
            try await users.updatePasswordHash(userID: user.id, hash: upgraded)
            logger.info("password hash upgraded to current parameters", metadata: ["user_id": .string(user.id.uuidString)])
        }
        return (user, try await sessions.create(userID: user.id))
    }

    static let invalidCredentials = AppError.unauthorized(code: "invalid_credentials", detail: "Login or password is incorrect")
    /// Only after the password matched, so it reveals nothing to someone guessing.
    static let suspended = AppError.forbiddenCode("account_suspended", "This account is suspended")

    /// Wrong current passwords count as failed logins for the account, so this is no side door
    /// for guessing. Every other session is revoked.
    /// The password again, for something that cannot be undone (erasing the account): throttled
    /// like a login, a wrong one is a 422 naming `field`.
    package func confirmPassword(_ password: String, of user: UserRecord, field: String) async throws {
        let accountKey = "login:account:\(user.id.uuidString)"
        if let wait = try await throttles.retryAfter(key: accountKey, limit: policy.loginFailures, window: policy.loginWindow) {
            throw AppError.throttled(retryAfterSeconds: wait)
        }
        guard try await hasher.verify(password, against: user.passwordHash) else {
            try await throttles.record(keys: [accountKey], window: policy.loginWindow)
            throw AppError.broken(field, "is incorrect")
        }
    }

    func changePassword(session: AuthenticatedSession, current: String, new: String) async throws {
        let accountKey = "login:account:\(session.user.id.uuidString)"
        if let wait = try await throttles.retryAfter(key: accountKey, limit: policy.loginFailures, window: policy.loginWindow) {
            throw AppError.throttled(retryAfterSeconds: wait)
        }
        guard try await hasher.verify(current, against: session.user.passwordHash) else {
            try await throttles.record(keys: [accountKey], window: policy.loginWindow)
            throw AppError.broken("current_password", "is incorrect")
        }
        let hash = try await hasher.hash(new)
        try await client.transaction(logger: logger) { connection in
            try await users.updatePasswordHash(userID: session.user.id, hash: hash, on: connection)
            try await sessions.revokeAll(userID: session.user.id, keeping: session.sessionID, on: connection)
        }
    }
}
