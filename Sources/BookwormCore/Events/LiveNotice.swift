import Foundation
import Logging
import PostgresNIO

/// Something a user is told on their event stream (`trade`, `alert`, `contact`): the object's
/// id and what happened to it. Published with `NOTIFY` on the transaction that causes it, as
/// the matching mail is queued, so PostgreSQL delivers it to every API process at commit, and
/// never for a change rolled back.
package struct LiveNotice: Sendable, Equatable {
    package let userID: UUID
    package let event: String
    package let objectID: UUID
    package let kind: String

    package init(userID: UUID, event: String, objectID: UUID, kind: String) {
        self.userID = userID
        self.event = event
        self.objectID = objectID
        self.kind = kind
    }

    /// The channel every live event travels on. Payloads: `s <user> <xid>` (the user's sync
    /// scope changed in transaction `xid`; written by `bookworm_sync_log`, migration 0033, and for
    /// inserts of copies and readings by `bookworm_sync_notify`, 0041),
    /// `h <xid>` (every transaction below `xid` had ended when it wrote: migration 0040),
    /// `p <post>` (a post with a place was written), `n <user> <event> <id> <kind>` (a notice).
    package static let channel = "events"

    var payload: String { "n \(userID.apiString) \(event) \(objectID.apiString) \(kind)" }

    /// Parses an `n` payload.
    package init?(payload: Substring) {
        let parts = payload.split(separator: " ")
        guard parts.count == 5, parts[0] == "n", let user = UUID(uuidString: String(parts[1])),
              let object = UUID(uuidString: String(parts[3])) else { return nil }
        self.init(userID: user, event: String(parts[2]), objectID: object, kind: String(parts[4]))
    }

    /// Queues the notices on `connection`'s transaction, in one statement.
    package static func publish(_ notices: [LiveNotice], on connection: PostgresConnection, logger: Logger) async throws {
        guard !notices.isEmpty else { return }
        try await connection.query("""
            SELECT pg_notify(\(channel), payload) FROM unnest(\(notices.map(\.payload))::text[]) AS t(payload)
            """, logger: logger)
    }
}
