import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// PostgresNIO 1.33.2 remembers a prepared statement whose preparation failed, per connection,
/// and answers every later run of it on that connection with the same error
/// (`PreparedStatementStateMachine`'s `.error` state). Preparing fails for reasons that pass: a
/// migration's lock held past `statement_timeout` (a rolling deploy), an aborted transaction.
/// `Database.preparing` closes a connection after such an error, so the pool opens a fresh one.
@Suite struct FailedPreparationTests {
    /// The dependency's behaviour. When this fails, PostgresNIO prepares again after a failure
    /// and `Database.preparing` can go.
    @Test func postgresNIOKeepsAFailedPreparationForTheConnectionsLifetime() async throws {
        try await withTestDatabase { _, admin in
            let logger = Logger(label: "failed-preparation")
            try await admin.withConnection { connection in
                try await connection.query("BEGIN", logger: logger)
                _ = try? await connection.query("SELECT 1 / 0", logger: logger)
                // The transaction is aborted, so PostgreSQL refuses the statement's Parse.
                #expect(await Self.outcome(on: connection, logger: logger) == "25P02")
                try await connection.query("ROLLBACK", logger: logger)
                // Not asked again: the aborted transaction's error, kept.
                #expect(await Self.outcome(on: connection, logger: logger) == "25P02")
            }
        }
    }

    /// A statement whose first preparation on the pool's one connection ran into a table locked
    /// past `statement_timeout` works again once the lock is gone.
    @Test func aStatementPreparedWhileItsTableWasLockedWorksOnceTheLockIsGone() async throws {
        try await withTestDatabase { settings, admin in
            let logger = Logger(label: "failed-preparation")
            let configuration = settings.clientConfiguration(poolSize: 1, statementTimeout: .milliseconds(300))
            try await PostgresClient(configuration: configuration, backgroundLogger: logger).whileRunning { pool in
                let database = Database(client: pool, deadlines: .init(acquire: .seconds(30), statement: .milliseconds(300)))
                // Opened first, so the locked preparation happens on the connection the pool keeps.
                _ = try await database.query("SELECT 1", logger: logger)
                let locked = Gate(), release = Gate()
                let holder = Task {
                    try await admin.withConnection { connection in
                        try await connection.query("BEGIN", logger: logger)
                        try await connection.query("LOCK TABLE users IN ACCESS EXCLUSIVE MODE", logger: logger)
                        locked.open()
                        await release.wait()
                        try await connection.query("COMMIT", logger: logger)
                    }
                }
                await locked.wait()
                await #expect(throws: (any Error).self) { try await database.execute(ProbeSQL(), logger: logger) }
                release.open()
                try await holder.value
                let rows = try await database.execute(ProbeSQL(), logger: logger)
                #expect(try rows.first?.decode(Int64.self) == 0)
            }
        }
    }

    /// "rows" when the probe ran, else the SQLSTATE of its error.
    private static func outcome(on connection: PostgresConnection, logger: Logger) async -> String {
        do {
            for try await _ in try await connection.execute(ProbeSQL(), logger: logger) {}
            return "rows"
        } catch let error as PSQLError {
            return error.serverInfo?[.sqlState] ?? "\(error.code)"
        } catch {
            return "\(error)"
        }
    }
}

private struct ProbeSQL: PreparedSQL {
    static let name = "bookworm_test_failed_preparation"
    static let sql = "SELECT count(*) FROM users WHERE username = 'nobody at all'"
    static var bindingDataTypes: [PostgresDataType] { [] }
    let values: [SQLValue] = []
}
