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

    /// The same as two probes of the blocks' indexes per row, for a scan that yields rows one
    /// at a time (nearest pins): `OFFSET 0` keeps each a subplan. As a join, the generic plan
    /// read all the viewer's blocks once and compared every pin with each of them (1.2 ms a
    /// page for a viewer with 2,000 blocks, against 0.34 ms).
    package static func noBlockByProbes(_ viewer: String, _ owner: String) -> String {
        """
        NOT EXISTS (SELECT 1 FROM blocks bl WHERE bl.blocker_id = \(viewer) AND bl.blocked_id = \(owner) OFFSET 0)
                  AND NOT EXISTS (SELECT 1 FROM blocks bl WHERE bl.blocker_id = \(owner) AND bl.blocked_id = \(viewer) OFFSET 0)
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

    /// The blocks among `ids` (the blocks' own ids) that `blocker` made (delta sync).
    package func blocked(_ ids: [UUID], by blocker: UUID) async throws -> [UUID: BlockView] {
        guard !ids.isEmpty else { return [:] }
        let rows = try await client.query("""
            SELECT bl.id, u.id, u.username, u.display_name, bl.created_at FROM blocks bl JOIN users u ON u.id = bl.blocked_id
            WHERE bl.blocker_id = \(blocker) AND bl.id = ANY(\(ids))
            """, logger: logger)
        var views: [UUID: BlockView] = [:]
        for try await row in rows.decode((UUID, UUID, String, String?, Date).self) {
            views[row.0] = BlockView(id: row.0, userID: row.1, username: row.2, displayName: row.3, createdAt: row.4)
        }
        return views
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

/// A user I block, as delta sync shows it.
package struct BlockView: Encodable, Sendable {
    let id: UUID
    let userID: UUID
    let username: String
    let displayName: String?
    let createdAt: Date

    enum CodingKeys: String, CodingKey {
        case id, userID = "user_id", username, displayName = "display_name", createdAt = "created_at"
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.apiString, forKey: .id)
        try container.encode(userID.apiString, forKey: .userID)
        try container.encode(username, forKey: .username)
        try container.encode(displayName, forKey: .displayName)
        try container.encode(createdAt, forKey: .createdAt)
    }
}
