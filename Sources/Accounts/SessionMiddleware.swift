import BookwormCore
import Foundation
import HTTPTypes
import Hummingbird

/// Requires `Authorization: Bearer <token>` naming a live session; anything else is 401.
/// `optional`: a request without the header goes on signed out, but a token that is sent must
/// be good, so a client never mistakes an expired session for a signed-out view.
package struct SessionMiddleware: RouterMiddleware {
    package typealias Context = AppRequestContext
    package let sessions: SessionStore

    package init(sessions: SessionStore, optional: Bool = false) {
        self.optional = optional
        self.sessions = sessions
    }
    let optional: Bool

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if optional, request.headers[.authorization] == nil { return try await next(request, context) }
        guard let header = request.headers[.authorization], header.count > 7,
              header.prefix(7).lowercased() == "bearer " else {
            throw AppError.unauthorized(code: "unauthorized", detail: "A bearer token is required")
        }
        let token = header.dropFirst(7).trimmingCharacters(in: .whitespaces)
        guard let session = try await sessions.authenticate(token: token) else {
            throw AppError.unauthorized(code: "invalid_token", detail: "The token is unknown, expired or revoked")
        }
        var context = context
        context.session = session
        context.logger[metadataKey: "user_id"] = .string(session.user.id.uuidString)
        return try await next(request, context)
    }
}
