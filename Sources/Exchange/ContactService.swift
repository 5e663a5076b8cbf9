import Accounts
import BookwormCore
import Discovery
import Foundation
import Logging
import Mail
import PostgresNIO

/// Contacting an owner through the service. The message, its outbox row and the throttle
/// counts are written in one transaction, so a refused or failed request leaves no trace and an
/// accepted one is always delivered (at least once). The recipient's address stays on the server.
package struct ContactService: Sendable {
    let client: Database
    let contacts: ContactStore
    let blocks: BlocksStore
    let outbox: OutboxStore
    let throttles: ThrottleStore
    let templates: MailTemplates
    let policy: ContactPolicy
    let budget: NotifyBudget
    let push: PushQueue
    let logger: Logger

    package init(client: Database, outbox: OutboxStore, push: PushQueue, throttles: ThrottleStore, templates: MailTemplates,
                 policy: ContactPolicy, notify: NotifyPolicy, logger: Logger) {
        self.push = push
        self.client = client
        self.contacts = ContactStore(client: client, logger: logger)
        self.blocks = BlocksStore(client: client, logger: logger)
        self.outbox = outbox
        self.throttles = throttles
        self.templates = templates
        self.policy = policy
        self.budget = NotifyBudget(throttles: throttles, policy: notify)
        self.logger = logger
    }

    package func contact(sender: UserRecord, target: ContactTarget, text: String, shareEmail: Bool) async throws -> UUID {
        guard sender.emailVerifiedAt != nil else {
            throw AppError.forbiddenCode("email-not-verified", "Verify your email address before contacting people")
        }
        return try await client.transaction(logger: logger) { connection in
            guard let recipient = try await contacts.recipient(for: target, on: connection) else {
                throw AppError.notFound("Nothing to contact there: no such user, copy or post")
            }
            try await checkAllowed(sender: sender, recipient: recipient, on: connection)
            let message = templates.contact(to: recipient.email, recipient: recipient.username, sender: sender.username,
                                            senderEmail: shareEmail ? sender.email : nil, bookTitle: recipient.bookTitle,
                                            text: text)
            let outboxID = try await outbox.enqueue(message, kind: .contact, on: connection)
            let id = try await contacts.insert(sender: sender.id, recipient: recipient, message: text, shareEmail: shareEmail,
                                               outboxID: outboxID, on: connection)
            try await throttles.record(keys: [Self.hourKey(sender.id)], window: 3600, on: connection)
            try await throttles.record(keys: [Self.pairKey(sender.id, recipient.id)], window: 86400, on: connection)
            try await LiveNotice.publish([LiveNotice(userID: recipient.id, event: "contact", objectID: id, kind: target.kind)],
                                         on: connection, logger: logger)
            // The mail's subject; the message itself stays in the mail, away from lock screens.
            try await push.enqueue([PushMessage(userID: recipient.id, category: "contact", title: "\(sender.username) wrote to you",
                                                body: recipient.bookTitle.map { "About \"\($0)\". Read it in your mail." }
                                                    ?? "Read it in your mail.", kind: "contact", objectID: id)], on: connection)
            return id
        }
    }

    package func sent(by sender: UUID, page: PageRequest) async throws -> Page<ContactView> {
        page.page(try await contacts.sent(by: sender, limit: page.limit + 1, after: page.after), cursor: \.cursor, item: { $0 })
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
        // Contact's own limits are the stricter ones for free text; the budget it shares with
        // trades is checked (and counted) last, so a refusal above never spends it.
        try await budget.charge(from: sender.id, to: recipient.id, on: connection)
    }

    static func hourKey(_ sender: UUID) -> String { "contact:sender:\(sender.apiString)" }
    static func pairKey(_ sender: UUID, _ recipient: UUID) -> String { "contact:pair:\(sender.apiString):\(recipient.apiString)" }
}
