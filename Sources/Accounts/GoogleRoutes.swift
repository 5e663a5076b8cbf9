import BookwormCore
import Foundation
import HTTPTypes
import Hummingbird

/// `POST /v1/auth/google`, `POST|DELETE /v1/me/identities/google` (API.md, Google sign-in).
/// Without `GOOGLE_CLIENT_IDS` they answer 404.
package struct GoogleRoutes: Sendable {
    let service: GoogleSignIn

    package init(service: GoogleSignIn) {
        self.service = service
    }

    package func addRoutes(public group: RouterGroup<AppRequestContext>, authenticated: RouterGroup<AppRequestContext>) {
        group.post("auth/google", use: signIn)
        authenticated.post("me/identities/google", use: link)
        authenticated.delete("me/identities/google", use: unlink)
    }

    static func token(_ request: inout Request, context: AppRequestContext) async throws -> String {
        let body = try await request.decodeStrict(GoogleTokenBody.self, context: context)
        guard !body.idToken.isEmpty, body.idToken.utf8.count <= 8192 else { throw AppError.invalid("id_token", "is 1 to 8192 characters") }
        return body.idToken
    }

    @Sendable func signIn(_ request: Request, context: AppRequestContext) async throws -> Response {
        _ = try service.enabledVerifier()
        var request = request
        let token = try await Self.token(&request, context: context)
        let signedIn = try await service.signIn(idToken: token, clientAddress: context.clientAddress(request))
        return try AuthResponse(user: PrivateUser(signedIn.user), token: signedIn.session.token,
                                expiresAt: signedIn.session.expiresAt, created: signedIn.created).response(for: request)
    }

    @Sendable func link(_ request: Request, context: AppRequestContext) async throws -> Response {
        let session = try context.requireSession()
        _ = try service.enabledVerifier()
        var request = request
        let token = try await Self.token(&request, context: context)
        try await service.link(idToken: token, session: session, clientAddress: context.clientAddress(request))
        return Response(status: .noContent)
    }

    @Sendable func unlink(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await service.unlink(session: try context.requireSession())
        return Response(status: .noContent)
    }
}
