import Foundation
import Logging
import PostgresNIO

/// The admin audit log: every admin command that changes something (or reads a person's
/// private details) writes a row in the transaction of its own change, so no action is
/// recorded that did not happen, and none happens unrecorded.
package struct AuditLog: Sendable {
    package let client: Database
    package let logger: Logger

    package init(client: Database, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    package struct Entry: Sendable {
        package let at: Date
        package let actor: String
        package let host: String
        package let action: String
        package let target: String
        package let reason: String?
    }

    package func record(actor: String, host: String, action: String, target: String, reason: String?, at: Date,
                        on connection: PostgresConnection) async throws {
        try await connection.query("""
            INSERT INTO admin_audit (at, actor, host, action, target, reason)
            VALUES (\(at), \(actor), \(host), \(action), \(target), \(reason))
            """, logger: logger)
    }

    /// Newest first.
    package func list(limit: Int) async throws -> [Entry] {
        let rows = try await client.query("""
            SELECT at, actor, host, action, target, reason FROM admin_audit ORDER BY at DESC, id DESC LIMIT \(limit)
            """, logger: logger)
        var entries: [Entry] = []
        for try await (at, actor, host, action, target, reason) in rows.decode((Date, String, String, String, String, String?).self) {
            entries.append(Entry(at: at, actor: actor, host: host, action: action, target: target, reason: reason))
        }
        return entries
    }
}
