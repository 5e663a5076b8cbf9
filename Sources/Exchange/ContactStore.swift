import BookwormCore
import Catalog
import Foundation
import Logging
import PostgresNIO

/// SQL for contact requests.
package struct ContactStore: Sendable {
    package let client: Database
    package let logger: Logger

    package init(client: Database, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// The recipient behind a username, an available copy or a post; nil when there is none.
    package func recipient(for target: ContactTarget, on connection: PostgresConnection) async throws -> ContactRecipient? {
        let query: PostgresQuery
        switch target {
        case .user(let username):
            query = """
                SELECT u.id, u.username, u.email, u.email_verified_at IS NOT NULL, NULL::uuid, NULL::uuid, NULL::text
                FROM users u WHERE lower(u.username) = \(username.lowercased()) AND u.suspended_at IS NULL
                """
        case .copy(let id):
            query = """
                SELECT u.id, u.username, u.email, u.email_verified_at IS NOT NULL, c.id, NULL::uuid, b.title
                FROM copies c JOIN users u ON u.id = c.owner_id JOIN books b ON b.id = c.book_id
                WHERE c.id = \(id) AND c.status <> 'withdrawn' AND c.hidden_at IS NULL AND u.suspended_at IS NULL
                """
        case .post(let id):
            query = """
                SELECT u.id, u.username, u.email, u.email_verified_at IS NOT NULL, po.copy_id, po.id, b.title
                FROM posts po JOIN users u ON u.id = po.author_id LEFT JOIN books b ON b.id = po.book_id
                WHERE po.id = \(id) AND po.hidden_at IS NULL AND u.suspended_at IS NULL
                """
        }
        let rows = try await connection.query(query, logger: logger)
        for try await r in rows.decode((UUID, String, String, Bool, UUID?, UUID?, String?).self) {
            return ContactRecipient(id: r.0, username: r.1, email: r.2, emailVerified: r.3, copyID: r.4, postID: r.5, bookTitle: r.6)
        }
        return nil
    }

    package func insert(sender: UUID, recipient: ContactRecipient, message: String, shareEmail: Bool, outboxID: UUID,
                on connection: PostgresConnection) async throws -> UUID {
        let rows = try await connection.query("""
            INSERT INTO contact_requests (sender_id, recipient_id, copy_id, post_id, book_title, message, share_email, outbox_id)
            VALUES (\(sender), \(recipient.id), \(recipient.copyID), \(recipient.postID), \(recipient.bookTitle), \(message),
                    \(shareEmail), \(outboxID))
            RETURNING id
            """, logger: logger)
        for try await id in rows.decode(UUID.self) { return id }
        throw AppError.unavailable("contact insert returned no row")
    }

    /// Newest first; the status is the outbox row's.
    package func sent(by sender: UUID, limit: Int, after: Cursor?) async throws -> [ContactView] {
        let micros = after.map { Int($0.micros) }
        let rows = try await client.query("""
            SELECT cr.id, u.id, u.username, u.display_name, cr.copy_id, cr.post_id, cr.book_title, cr.message, cr.share_email,
                   o.status, cr.created_at, (EXTRACT(EPOCH FROM cr.created_at) * 1000000)::int8
            FROM contact_requests cr JOIN users u ON u.id = cr.recipient_id JOIN outbox_messages o ON o.id = cr.outbox_id
            WHERE cr.sender_id = \(sender)
              AND (\(micros)::int8 IS NULL OR (cr.created_at, cr.id) < (timestamptz 'epoch' + \(micros) * interval '1 microsecond', \(after?.id)))
            ORDER BY cr.created_at DESC, cr.id DESC
            LIMIT \(limit)
            """, logger: logger)
        var views: [ContactView] = []
        for try await r in rows.decode((UUID, UUID, String, String?, UUID?, UUID?, String?, String, Bool, String, Date, Int64).self) {
            views.append(ContactView(id: r.0, to: OwnerSummary(id: r.1, username: r.2, displayName: r.3), copyID: r.4, postID: r.5,
                                     bookTitle: r.6, message: r.7, shareEmail: r.8, status: r.9, createdAt: r.10, createdMicros: r.11))
        }
        return views
    }
}
