import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// `bookworm push stats|test`: the operator's view of the push queue, and a test push.
package struct PushAdmin: Sendable {
    let client: Database
    let logger: Logger

    package init(client: Database, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Queued pushes by provider and status (due now, waiting for a retry, being sent), and devices by platform.
    package func stats(now: Date) async throws -> String {
        let rows = try await client.query("""
            SELECT coalesce(payload->>'provider', '(unreadable)'),
                   CASE WHEN lease_until > \(now) THEN 'sending' WHEN attempts = 0 THEN 'queued' ELSE 'retrying' END AS status,
                   count(*)::int8, coalesce(EXTRACT(EPOCH FROM \(now) - min(created_at)), 0)::float8,
                   coalesce((array_agg(last_error ORDER BY run_at DESC) FILTER (WHERE last_error IS NOT NULL))[1], '')
            FROM jobs WHERE kind = 'push'
            GROUP BY 1, 2 ORDER BY 1, 2
            """, logger: logger)
        var table = [["PROVIDER", "STATUS", "PUSHES", "OLDEST", "LAST ERROR"]]
        for try await (provider, status, count, age, error) in rows.decode((String, String, Int, Double, String).self) {
            table.append([provider, status, "\(count)", OutboxAdmin.age(age), String(error.prefix(60))])
        }
        if table.count == 1 { table.append(["(empty)", "-", "0", "-", "-"]) }
        var devices: [String] = []
        let counted = try await client.query("SELECT platform, count(*)::int8 FROM devices GROUP BY platform ORDER BY platform", logger: logger)
        for try await (platform, count) in counted.decode((String, Int).self) { devices.append("\(platform) \(count)") }
        return TextTable.render(table) + "\ndevices: " + (devices.isEmpty ? "none" : devices.joined(separator: ", "))
    }

    /// Queues one test push to each of `username`'s devices; returns their job ids (none: no device, or push is off).
    package func queueTest(username: String, queue: PushQueue) async throws -> [UUID] {
        try await client.transaction(logger: logger) { connection in
            let rows = try await connection.query("SELECT id FROM users WHERE lower(username) = \(username.lowercased())", logger: logger)
            var user: UUID?
            for try await id in rows.decode(UUID.self) { user = id }
            guard let user else { throw AppError.notFound("No user named \(username)") }
            return try await queue.enqueue([PushMessage(userID: user, category: "test", title: "Bookworm",
                                                        body: "Push notifications reach this phone.", kind: "test", objectID: user)],
                                           on: connection)
        }
    }

    /// What became of the test pushes: (sent or dropped, still waiting with their last error).
    package func outcome(of jobs: [UUID]) async throws -> (done: Int, waiting: [String]) {
        var waiting: [String] = []
        let rows = try await client.query("SELECT coalesce(last_error, 'not tried yet') FROM jobs WHERE id = ANY(\(jobs))", logger: logger)
        for try await error in rows.decode(String.self) { waiting.append(error) }
        return (jobs.count - waiting.count, waiting)
    }
}
