import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// Who blocked whom. A block works both ways for visibility: neither sees the other in
/// nearby results, the library or the feed; and the blocked one cannot contact the blocker.
package struct BlocksStore: Sendable {
    package let client: Database
    package let logger: Logger

    package init(client: Database, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// SQL for "no block between `viewer` and `owner`", for lists a signed-in user reads.
    /// `viewer` and `owner` are SQL expressions (a parameter and a column).
    package static func noBlockBetween(_ viewer: String, _ owner: String) -> String {
        """
        NOT EXISTS (SELECT 1 FROM blocks bl
                    WHERE (bl.blocker_id = \(viewer) AND bl.blocked_id = \(owner))
                       OR (bl.blocker_id = \(owner) AND bl.blocked_id = \(viewer)))
        """
    }

    package func block(_ blocked: UUID, by blocker: UUID, on connection: PostgresConnection? = nil) async throws {
        try await client.query("""
            INSERT INTO blocks (blocker_id, blocked_id) VALUES (\(blocker), \(blocked)) ON CONFLICT DO NOTHING
            """, on: connection, logger: logger)
    }

    func unblock(_ blocked: UUID, by blocker: UUID) async throws {
        try await client.query("DELETE FROM blocks WHERE blocker_id = \(blocker) AND blocked_id = \(blocked)", logger: logger)
    }

    /// Whether either has blocked the other.
    package func isBlocked(between first: UUID, and second: UUID, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query("""
            SELECT 1 FROM blocks
            WHERE (blocker_id = \(first) AND blocked_id = \(second)) OR (blocker_id = \(second) AND blocked_id = \(first))
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }
}
