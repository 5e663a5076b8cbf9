import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// A queued message as a worker claims it.
package struct ClaimedMessage: Sendable {
    let id: UUID
    let messageID: String
    let envelopeFrom: String
    let recipient: String
    let content: String
    let attempts: Int
    /// The recipient is on `mail_suppressions`: fail it without sending.
    let suppressed: Bool
}

package enum OutboxKind: String, Sendable {
    case verifyEmail = "verify_email", passwordReset = "password_reset", contact, trade, alert
    case accountDeleted = "account_deleted"
}

/// SQL for the outbox. Writers enqueue on the connection of their own transaction, so the
/// message exists exactly when the change that causes it does.
package struct OutboxStore: Sendable {
    package let client: Database
    package let logger: Logger

    package let clock: any AppClock

    package init(client: Database, logger: Logger, clock: any AppClock) {
        self.client = client
        self.logger = logger
        self.clock = clock
    }

    @discardableResult
    package func enqueue(_ message: MailMessage, kind: OutboxKind, on connection: PostgresConnection) async throws -> UUID {
        guard let id = try await enqueue([message], kind: kind, on: connection).first else {
            throw AppError.unavailable("outbox insert returned no row")
        }
        return id
    }

    /// Many messages in one statement (the benchmark queues tens of thousands this way).
    package func enqueue(_ messages: [MailMessage], kind: OutboxKind, on connection: PostgresConnection) async throws -> [UUID] {
        let rows = try await connection.query("""
            INSERT INTO outbox_messages (message_id, kind, envelope_from, recipient, subject, content, next_attempt_at)
            SELECT message_id, \(kind.rawValue), envelope_from, recipient, subject, content, \(clock.now())
            FROM unnest(\(messages.map(\.messageID))::text[], \(messages.map { MailAddress.split($0.from).address })::text[],
                        \(messages.map { MailAddress.split($0.to).address })::text[],
                        \(messages.map { MailHeader.clean($0.subject, limit: 200) })::text[], \(messages.map { $0.rendered() })::text[])
                 AS t(message_id, envelope_from, recipient, subject, content)
            RETURNING id
            """, logger: logger)
        var ids: [UUID] = []
        for try await id in rows.decode(UUID.self) { ids.append(id) }
        return ids
    }

    package func isSuppressed(_ address: String, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query("SELECT 1 FROM mail_suppressions WHERE address = \(address.lowercased())", logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Due rows, oldest first, locked past other workers (`SKIP LOCKED`) and leased to `worker`.
    /// A row whose lease ran out (its worker died) is due again.
    func claim(worker: UUID, batch: Int, lease: TimeInterval) async throws -> [ClaimedMessage] {
        let rows = try await client.query("""
            WITH due AS (
                SELECT id FROM outbox_messages
                WHERE status = 'queued' AND next_attempt_at <= \(clock.now())
                  AND (lease_expires_at IS NULL OR lease_expires_at < \(clock.now()))
                ORDER BY next_attempt_at
                LIMIT \(batch)
                FOR UPDATE SKIP LOCKED
            )
            UPDATE outbox_messages o
            SET lease_owner = \(worker), lease_expires_at = \(clock.now()) + make_interval(secs => \(lease)),
                attempts = o.attempts + 1, updated_at = \(clock.now())
            FROM due WHERE o.id = due.id
            RETURNING o.id, o.message_id, o.envelope_from, o.recipient, o.content, o.attempts,
                      EXISTS (SELECT 1 FROM mail_suppressions s WHERE s.address = lower(o.recipient))
            """, logger: logger)
        var claimed: [ClaimedMessage] = []
        for try await (id, messageID, from, to, content, attempts, suppressed) in rows.decode((UUID, String, String, String, String, Int, Bool).self) {
            claimed.append(ClaimedMessage(id: id, messageID: messageID, envelopeFrom: from, recipient: to, content: content,
                                          attempts: attempts, suppressed: suppressed))
        }
        return claimed
    }

    /// Extends this worker's lease on those of `ids` it still holds and returns them. A row missing
    /// from the answer was lost (its lease ran out and another worker took it, or an operator
    /// discarded it): sending it now could send it twice.
    func renew(_ ids: [UUID], worker: UUID, lease: TimeInterval) async throws -> Set<UUID> {
        guard !ids.isEmpty else { return [] }
        let rows = try await client.query("""
            UPDATE outbox_messages
            SET lease_expires_at = \(clock.now()) + make_interval(secs => \(lease))
            WHERE id = ANY(\(ids)) AND lease_owner = \(worker) AND status = 'queued'
            RETURNING id
            """, logger: logger)
        return try await Self.ids(rows)
    }

    private static func ids(_ rows: Rows) async throws -> Set<UUID> {
        var held: Set<UUID> = []
        for try await id in rows.decode(UUID.self) { held.insert(id) }
        return held
    }

    /// Only rows this worker still holds: a row whose lease ran out belongs to whoever took it.
    /// A sent message's content is dropped: it held codes, reset links and people's messages,
    /// and nothing needs it once delivered (the row keeps who, what kind and when). Several
    /// messages sent while the previous record was being written are recorded in one statement.
    func markSent(_ ids: [UUID], worker: UUID) async throws {
        guard !ids.isEmpty else { return }
        try await client.query("""
            UPDATE outbox_messages
            SET status = 'sent', sent_at = \(clock.now()), updated_at = \(clock.now()), content = '',
                lease_owner = NULL, lease_expires_at = NULL, last_error = NULL
            WHERE id = ANY(\(ids)) AND lease_owner = \(worker)
            """, logger: logger)
    }

    func scheduleRetry(_ id: UUID, worker: UUID, after delay: TimeInterval, error: String) async throws {
        try await client.query("""
            UPDATE outbox_messages
            SET next_attempt_at = \(clock.now()) + make_interval(secs => \(delay)), last_error = \(String(error.prefix(500))),
                lease_owner = NULL, lease_expires_at = NULL, updated_at = \(clock.now())
            WHERE id = \(id) AND lease_owner = \(worker)
            """, logger: logger)
    }

    /// Failed for good; with `suppress`, the address gets no further mail. One statement, so
    /// both happen or neither does.
    func markFailed(_ id: UUID, worker: UUID, error: String, suppress address: String?) async throws {
        let reason = String(error.prefix(500))
        try await client.query("""
            WITH failed AS (
                UPDATE outbox_messages
                SET status = 'failed', last_error = \(reason), lease_owner = NULL, lease_expires_at = NULL,
                    updated_at = \(clock.now())
                WHERE id = \(id) AND lease_owner = \(worker)
            )
            INSERT INTO mail_suppressions (address, reason)
            SELECT \(address?.lowercased())::text, \(reason) WHERE \(address)::text IS NOT NULL
            ON CONFLICT (address) DO NOTHING
            """, logger: logger)
    }

    /// Housekeeping: failed messages older than `days` lose their content, as sent ones do at once.
    @discardableResult
    package func dropFailedContent(olderThanDays days: Int) async throws -> Int {
        let rows = try await client.query("""
            WITH dropped AS (
                UPDATE outbox_messages SET content = ''
                WHERE status = 'failed' AND content <> '' AND updated_at < \(clock.now()) - make_interval(days => \(days)::int4)
                RETURNING 1
            )
            SELECT count(*)::int8 FROM dropped
            """, logger: logger)
        var count = 0
        for try await value in rows.decode(Int.self) { count = value }
        return count
    }

    /// On shutdown: rows claimed but not sent become due again at once, the attempt not counted.
    func release(_ ids: [UUID], worker: UUID) async throws {
        guard !ids.isEmpty else { return }
        try await client.query("""
            UPDATE outbox_messages
            SET lease_owner = NULL, lease_expires_at = NULL, attempts = greatest(attempts - 1, 0), updated_at = \(clock.now())
            WHERE id = ANY(\(ids)) AND lease_owner = \(worker) AND status = 'queued'
            """, logger: logger)
    }
}
