import Accounts
import BookwormCore
import Discovery
import Foundation
import HTTPTypes
import Hummingbird
import Mail
import PostgresNIO

/// `POST /v1/contact` and `GET /v1/me/contacts` (API.md, Contact). The recipient's address
/// stays on the server: the sender learns only the request's id and delivery status.
package struct ContactRoutes: Sendable {
    let service: ContactService

    package init(service: ContactService) {
        self.service = service
    }

    package func addRoutes(authenticated: RouterGroup<AppRequestContext>) {
        authenticated.post("contact", use: contact)
        authenticated.get("me/contacts", use: sent)
    }

    @Sendable func contact(_ request: Request, context: AppRequestContext) async throws -> Response {
        let sender = try context.requireSession().user
        var request = request
        let body = try await request.decodeStrict(ContactBody.self, context: context)
        let (target, text) = try Self.validate(body)
        let id = try await service.contact(sender: sender, target: target, text: text, shareEmail: body.shareEmail)
        return try .json(["id": id.apiString, "status": "queued"], status: .accepted, for: request)
    }

    static func validate(_ body: ContactBody) throws -> (ContactTarget, String) {
        var errors: [FieldError] = []
        let text = try collectFieldErrors(&errors) { try FeedValidation.body(body.message, field: "message") }
        var targets: [ContactTarget] = []
        if let username = body.toUsername?.trimmingCharacters(in: .whitespaces), !username.isEmpty {
            if username.count > 30 { errors.append(FieldError("to_username", "is not a username")) }
            targets.append(.user(username))
        }
        if let copy = body.copyID { targets.append(.copy(copy)) }
        if let post = body.postID { targets.append(.post(post)) }
        guard errors.isEmpty, let text else { throw AppError.validation(errors) }
        guard targets.count == 1, let target = targets.first else {
            throw AppError.broken("to_username", "give exactly one of to_username, copy_id, post_id")
        }
        return (target, text)
    }

    @Sendable func sent(_ request: Request, context: AppRequestContext) async throws -> Response {
        let sender = try context.requireSession().user.id
        return try .json(try await service.sent(by: sender, page: PageRequest(request)), for: request)
    }
}
