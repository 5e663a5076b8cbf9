import BookwormCore
import Foundation
import Logging
import Mail
import PostgresNIO

/// What a trade mail is about.
package enum TradeNotice: Sendable {
    case requested, accepted, declined, declinedReserved, countered, cancelled, confirmed, completed, returned, expired
    /// Cancelled by the service: the other side's account was suspended. Says no more than
    /// that, since why someone is suspended is between them and the moderators.
    case otherSideInactive
    case dueSoon, overdue

    /// The `kind` of the `trade` event that goes with the mail.
    var eventKind: String {
        switch self {
        case .declinedReserved: "declined"
        case .otherSideInactive: "cancelled"
        case .dueSoon: "due_soon"
        default: "\(self)"
        }
    }
}

/// Mails about trades, queued on the transaction of the change they report. They come from the
/// service's address and name the other participant by username only: no address is ever shown.
struct TradeMail: Sendable {
    let outbox: OutboxStore
    let push: PushQueue
    let templates: MailTemplates
    let logger: Logger

    private struct Party {
        let username: String
        let email: String
        let verified: Bool
    }

    /// Queues the notice for `recipients` of the trade (unverified addresses get nothing).
    func notify(_ notice: TradeNotice, trade: UUID, recipients: [TradeRole], on connection: PostgresConnection) async throws {
        try await notify(notice, trades: [trade], recipients: recipients, on: connection)
    }

    /// The same notice about many trades: one read, one insert.
    func notify(_ notice: TradeNotice, trades: [UUID], recipients: [TradeRole], on connection: PostgresConnection) async throws {
        guard !trades.isEmpty else { return }
        let rows = try await connection.query("""
            SELECT t.kind, t.due_on::text, b.title, o.username, o.email, o.email_verified_at IS NOT NULL,
                   r.username, r.email, r.email_verified_at IS NOT NULL, t.id, t.owner_id, t.requester_id
            FROM trades t JOIN books b ON b.id = t.book_id JOIN users o ON o.id = t.owner_id JOIN users r ON r.id = t.requester_id
            WHERE t.id = ANY(\(trades))
            """, logger: logger)
        var messages: [MailMessage] = []
        var notices: [LiveNotice] = []
        var pushes: [PushMessage] = []
        for try await row in rows.decode((String, String?, String, String, String, Bool, String, String, Bool, UUID, UUID, UUID).self) {
            let owner = Party(username: row.3, email: row.4, verified: row.5)
            let requester = Party(username: row.6, email: row.7, verified: row.8)
            for role in recipients {
                let (me, other) = role == .owner ? (owner, requester) : (requester, owner)
                // The app hears of it whether or not the address is verified.
                let recipient = role == .owner ? row.10 : row.11
                notices.append(LiveNotice(userID: recipient, event: "trade", objectID: row.9, kind: notice.eventKind))
                let (subject, text) = Self.wording(notice, kind: row.0, title: row.2, other: other.username, dueOn: row.1)
                // The phone too, whatever the address: the same words, one collapse id per trade.
                pushes.append(PushMessage(userID: recipient, category: "trades", title: subject, body: text, kind: "trade",
                                          objectID: row.9, collapseID: "trade-\(row.9.apiString)"))
                guard me.verified else { continue }
                messages.append(templates.notice(to: me.email, recipient: me.username, subject: subject, text: text))
            }
        }
        if !messages.isEmpty { _ = try await outbox.enqueue(messages, kind: .trade, on: connection) }
        try await LiveNotice.publish(notices, on: connection, logger: logger)
        try await push.enqueue(pushes, on: connection)
    }

    static func wording(_ notice: TradeNotice, kind: String, title: String, other: String, dueOn: String?) -> (String, String) {
        let book = "\"\(title)\""
        let open = "Open Bookworm to see the trade."
        switch notice {
        case .requested:
            let wish = switch kind {
            case "loan": "would like to borrow \(book) until \(dueOn ?? "a date you agree on")"
            case "swap": "would like to swap a book of theirs for \(book)"
            default: "would like \(book) as a gift"
            }
            return ("\(other) asks for \(book)", "\(other) \(wish). \(open)")
        case .accepted:
            return ("\(other) accepted: \(book)", "\(other) accepted the \(kind) of \(book). Meet, hand over, and confirm in the app.")
        case .declined:
            return ("\(other) declined: \(book)", "\(other) declined the \(kind) of \(book).")
        case .declinedReserved:
            return ("\(book) is no longer available", "\(book) was promised in another trade, so your request was declined.")
        case .countered:
            return ("\(other) proposed another swap for \(book)", "\(other) proposed another copy for the swap of \(book). \(open)")
        case .cancelled:
            return ("\(other) cancelled: \(book)", "\(other) cancelled the \(kind) of \(book).")
        case .otherSideInactive:
            return ("Trade cancelled: \(book)", "The \(kind) of \(book) with \(other) was cancelled because their account is no longer active.")
        case .confirmed:
            return ("\(other) confirmed the handover of \(book)", "\(other) confirmed the handover of \(book). Confirm it too to complete the trade.")
        case .completed:
            return ("Trade completed: \(book)", "The \(kind) of \(book) with \(other) is complete. You can rate each other for 30 days.")
        case .returned:
            return ("\(book) is back", "\(other) confirmed that \(book) came back. Thank you for returning it.")
        case .expired:
            return ("Trade expired: \(book)", "The \(kind) of \(book) with \(other) expired without activity.")
        case .dueSoon:
            return ("\(book) is due on \(dueOn ?? "its due date")", "The loan of \(book) from \(other) is due on \(dueOn ?? "its due date").")
        case .overdue:
            return ("\(book) is overdue", "The loan of \(book) from \(other) was due on \(dueOn ?? "its due date"). Please return it.")
        }
    }
}
