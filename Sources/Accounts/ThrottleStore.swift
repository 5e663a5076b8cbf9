import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// Sliding-window counters in PostgreSQL, so every API instance sees the same counts.
/// A key names what is limited: `login:account:<id>`, `login:ip:<address>`, `register:ip:<address>`.
package struct ThrottleStore: Sendable {
    package let client: Database
    package let logger: Logger

    package let clock: any AppClock

    package init(client: Database, logger: Logger, clock: any AppClock) {
        self.client = client
        self.logger = logger
        self.clock = clock
    }

    /// Seconds until another event under `key` is allowed, or nil when under `limit`.
    /// On `connection` when given, so a check and the write it guards share a transaction.
    package func retryAfter(key: String, limit: Int, window: TimeInterval, on connection: PostgresConnection? = nil) async throws -> Int? {
        let now = clock.now()
        let query: PostgresQuery = """
            SELECT count(*)::int8, EXTRACT(EPOCH FROM (min(occurred_at) + make_interval(secs => \(window)) - \(now)))::float8
            FROM throttle_events
            WHERE key = \(key) AND occurred_at > \(now) - make_interval(secs => \(window))
            """
        let rows = try await client.query(query, on: connection, logger: logger)
        for try await (count, remaining) in rows.decode((Int, Double?).self) where count >= limit {
            return max(1, Int((remaining ?? window).rounded(.up)))
        }
        return nil
    }

    /// Serialises check-then-record under `key` until the transaction ends, so parallel requests
    /// cannot all pass a limit before any of them is counted.
    package func lock(key: String, on connection: PostgresConnection) async throws {
        try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(key), 0))", logger: logger)
    }

    /// Counts one event under each key, trimming that key's events older than the window.
    package func record(keys: [String], window: TimeInterval, on connection: PostgresConnection? = nil) async throws {
        let now = clock.now()
        let query: PostgresQuery = """
            WITH trimmed AS (
                DELETE FROM throttle_events
                WHERE key = ANY(\(keys)) AND occurred_at < \(now) - make_interval(secs => \(window))
            )
            INSERT INTO throttle_events (key, occurred_at) SELECT unnest(\(keys)), \(now)
            """
        try await client.query(query, on: connection, logger: logger)
    }

    /// Of `keys` (one per member of `ids`), those under `limit` events within the window get one
    /// more; their members are returned. For a batch, in one statement; the caller holds the lock.
    package func recordUnder(keys: [String], for ids: [UUID], limit: Int, window: TimeInterval,
                             on connection: PostgresConnection) async throws -> Set<UUID> {
        let now = clock.now()
        let rows = try await connection.query("""
            WITH wanted AS (SELECT * FROM unnest(\(keys)::text[], \(ids)::uuid[]) AS w(key, id)),
            allowed AS (
                SELECT w.key, w.id FROM wanted w
                WHERE (SELECT count(*) FROM throttle_events t
                       WHERE t.key = w.key AND t.occurred_at > \(now) - make_interval(secs => \(window))) < \(limit)
            ), counted AS (
                INSERT INTO throttle_events (key, occurred_at) SELECT key, \(now) FROM allowed
            )
            SELECT id FROM allowed
            """, logger: logger)
        var allowed: Set<UUID> = []
        for try await id in rows.decode(UUID.self) { allowed.insert(id) }
        return allowed
    }

    func reset(key: String) async throws {
        try await client.query("DELETE FROM throttle_events WHERE key = \(key)", logger: logger)
    }

    /// Housekeeping for keys never hit again: nothing we throttle looks back over a day.
    package func deleteOlderThan(seconds: TimeInterval) async throws {
        try await client.query("""
            DELETE FROM throttle_events WHERE occurred_at < \(clock.now()) - make_interval(secs => \(seconds))
            """, logger: logger)
    }
}
