import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// SQL for erasing an account. Runs inside the erasure's transaction, after its open trades are
/// cancelled (so no copy of theirs is still reserved).
struct ErasureStore: Sendable {
    let logger: Logger

    /// Takes the username's lock (registration waits on it too), so the name is never free
    /// between this transaction's delete and its hold.
    func lockUsername(_ username: String, on connection: PostgresConnection) async throws {
        try await connection.query("SELECT pg_advisory_xact_lock(hashtext('username:' || lower(\(username))))", logger: logger)
    }

    /// A "Deleted user" of its own that takes the person's place in what others keep: their
    /// trades, ratings and copies' journeys. One per erasure, so a trade between two erased
    /// people still has two sides.
    func makePlaceholder(at now: Date, on connection: PostgresConnection) async throws -> UUID {
        let tag = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let rows = try await connection.query("""
            INSERT INTO users (email, email_normalized, username, display_name, password_hash, erased_at, alerts)
            VALUES (\("erased-\(tag)@invalid"), \("erased-\(tag)@invalid"), \("deleted_\(tag.prefix(20))"), 'Deleted user',
                    '!', \(now), 'off')
            RETURNING id
            """, logger: logger)
        for try await id in rows.decode(UUID.self) { return id }
        throw AppError.unavailable("placeholder insert returned no row")
    }

    /// Others' history now names the placeholder instead of the person.
    func handOver(from user: UUID, to placeholder: UUID, on connection: PostgresConnection) async throws {
        for statement: PostgresQuery in [
            "UPDATE trades SET requester_id = \(placeholder) WHERE requester_id = \(user)",
            "UPDATE trades SET owner_id = \(placeholder) WHERE owner_id = \(user)",
            "UPDATE trade_events SET by_id = \(placeholder) WHERE by_id = \(user)",
            "UPDATE trade_ratings SET rater_id = \(placeholder) WHERE rater_id = \(user)",
            "UPDATE trade_ratings SET ratee_id = \(placeholder) WHERE ratee_id = \(user)",
            "UPDATE copy_transfers SET from_owner_id = \(placeholder) WHERE from_owner_id = \(user)",
            "UPDATE copy_transfers SET to_owner_id = \(placeholder) WHERE to_owner_id = \(user)",
        ] {
            try await connection.query(statement, logger: logger)
        }
    }

    /// Copies (and photos no other copy shows), then the user row, which takes sessions, pins,
    /// posts, readings, wishes, blocks, contact requests and codes with it; then what has no
    /// foreign key: alerts, throttle counts, the sync log, mail to the address.
    func erase(_ user: UUID, placeholder: UUID, email: String, on connection: PostgresConnection) async throws {
        try await connection.query("""
            WITH gone AS (DELETE FROM copies WHERE owner_id = \(user) RETURNING photo_id)
            DELETE FROM photos p WHERE p.id IN (SELECT photo_id FROM gone)
              AND NOT EXISTS (SELECT 1 FROM copies c WHERE c.photo_id = p.id AND c.owner_id <> \(user))
            """, logger: logger)
        for statement: PostgresQuery in [
            "DELETE FROM users WHERE id = \(user)",
            "DELETE FROM alerts WHERE user_id = \(user)",
            "DELETE FROM throttle_events WHERE key ILIKE '%' || \(user.uuidString) || '%'",
            "DELETE FROM sync_changes WHERE user_id IN (\(user), \(placeholder))",
            "DELETE FROM outbox_messages WHERE lower(recipient) = lower(\(email))",
            "DELETE FROM mail_suppressions WHERE lower(address) = lower(\(email))",
        ] {
            try await connection.query(statement, logger: logger)
        }
    }

    func holdUsername(_ username: String, until: Date, on connection: PostgresConnection) async throws {
        try await connection.query("""
            INSERT INTO username_holds (username, until) VALUES (lower(\(username)), \(until))
            ON CONFLICT (username) DO UPDATE SET until = greatest(username_holds.until, EXCLUDED.until)
            """, logger: logger)
    }

    func isSuppressed(_ email: String, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query("SELECT 1 FROM mail_suppressions WHERE lower(address) = lower(\(email))", logger: logger)
        for try await _ in rows { return true }
        return false
    }
}

/// Housekeeping after erasures: lifts username holds that ran out, and erases the address and
/// text of confirmation mail once it is sent (or has failed for good): the last trace of the person.
package struct ErasureSweep: Sendable {
    let client: Database
    let logger: Logger

    package init(client: Database, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    package func lift(before now: Date) async throws {
        try await client.query("DELETE FROM username_holds WHERE until <= \(now)", logger: logger)
    }

    package func scrubConfirmations() async throws {
        try await client.query("""
            UPDATE outbox_messages SET recipient = 'erased@invalid', subject = '', content = ''
            WHERE kind = 'account_deleted' AND status <> 'queued' AND recipient <> 'erased@invalid'
            """, logger: logger)
    }
}
