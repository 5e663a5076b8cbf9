import Foundation
import HTTPTypes
import Hummingbird
import PostgresNIO

/// `POST /v1/contact` and `GET /v1/me/contacts` (API.md, Contact). The recipient's address
/// stays on the server: the sender learns only the request's id and delivery status.
struct ContactRoutes: Sendable {
    let client: PostgresClient
    let contacts: ContactStore
    let blocks: BlocksStore
    let outbox: OutboxStore
    let throttles: ThrottleStore
    let templates: MailTemplates
    let policy: ContactPolicy

    func addRoutes(authenticated: RouterGroup<AppRequestContext>) {
        authenticated.post("contact", use: contact)
        authenticated.get("me/contacts", use: sent)
    }

    @Sendable func contact(_ request: Request, context: AppRequestContext) async throws -> Response {
        let sender = try context.requireSession().user
        var request = request
        let body = try await request.decodeStrict(ContactBody.self, context: context)
        let (target, text) = try Self.validate(body)
        guard sender.emailVerifiedAt != nil else {
            throw AppError.forbiddenCode("email-not-verified", "Verify your email address before contacting people")
        }
        let id = try await client.transaction(logger: context.logger) { connection in
            guard let recipient = try await contacts.recipient(for: target, on: connection) else {
                throw AppError.notFound("Nothing to contact there: no such user, copy or post")
            }
            try await checkAllowed(sender: sender, recipient: recipient, on: connection)
            let message = templates.contact(to: recipient.email, recipient: recipient.username, sender: sender.username,
                                            senderEmail: body.shareEmail ? sender.email : nil, bookTitle: recipient.bookTitle,
                                            text: text)
            let outboxID = try await outbox.enqueue(message, kind: .contact, on: connection)
            let id = try await contacts.insert(sender: sender.id, recipient: recipient, message: text, shareEmail: body.shareEmail,
                                               outboxID: outboxID, on: connection)
            try await throttles.record(keys: [Self.hourKey(sender.id)], window: 3600, on: connection)
            try await throttles.record(keys: [Self.pairKey(sender.id, recipient.id)], window: 86400, on: connection)
            return id
        }
        return try .json(["id": id.apiString, "status": "queued"], status: .accepted, for: request)
    }

    /// Refusals in a fixed order, none of which says anything about the recipient's address.
    private func checkAllowed(sender: UserRecord, recipient: ContactRecipient, on connection: PostgresConnection) async throws {
        guard recipient.id != sender.id else { throw AppError.unprocessable("You cannot contact yourself") }
        guard try await !blocks.isBlocked(between: sender.id, and: recipient.id, on: connection) else {
            throw AppError.forbiddenCode("blocked", "You cannot contact this user")
        }
        guard recipient.emailVerified, try await !outbox.isSuppressed(recipient.email, on: connection) else {
            throw AppError.unprocessable("This user cannot receive messages yet")
        }
        try await throttles.lock(key: Self.hourKey(sender.id), on: connection)
        if let wait = try await throttles.retryAfter(key: Self.hourKey(sender.id), limit: policy.perHour, window: 3600, on: connection) {
            throw AppError.throttled(retryAfterSeconds: wait)
        }
        if let wait = try await throttles.retryAfter(key: Self.pairKey(sender.id, recipient.id), limit: policy.perRecipientPerDay,
                                                     window: 86400, on: connection) {
            throw AppError.throttled(retryAfterSeconds: wait)
        }
    }

    static func hourKey(_ sender: UUID) -> String { "contact:sender:\(sender.apiString)" }
    static func pairKey(_ sender: UUID, _ recipient: UUID) -> String { "contact:pair:\(sender.apiString):\(recipient.apiString)" }

    static func validate(_ body: ContactBody) throws -> (ContactTarget, String) {
        var errors: [FieldError] = []
        let text = collectFieldErrors(&errors) { try FeedValidation.body(body.message, field: "message") }
        var targets: [ContactTarget] = []
        if let username = body.toUsername?.trimmingCharacters(in: .whitespaces), !username.isEmpty {
            if username.count > 30 { errors.append(FieldError("to_username", "is not a username")) }
            targets.append(.user(username))
        }
        if let copy = body.copyID { targets.append(.copy(copy)) }
        if let post = body.postID { targets.append(.post(post)) }
        if targets.count != 1 {
            errors.append(FieldError("to_username", "give exactly one of to_username, copy_id, post_id"))
        }
        guard errors.isEmpty, let text, let target = targets.first else { throw AppError.validation(errors) }
        return (target, text)
    }

    @Sendable func sent(_ request: Request, context: AppRequestContext) async throws -> Response {
        let sender = try context.requireSession().user.id
        return try .json(try await contacts.sent(by: sender, page: PageRequest(request)), for: request)
    }
}
