import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// A prepared statement whose preparation failed for a reason that passes is prepared again on a
/// fresh connection (`FailedPreparation`; PostgresNIO keeps the failure for the connection's
/// lifetime, which `PreparedStatementMemoryTests` shows). The first two tests run on a pool of
/// one connection, so without the close the second run would meet the kept error.
@Suite struct FailedPreparationTests {
    /// The error reaches the caller as itself (the transaction ends on its connection, which is
    /// not closed under it), and nothing stays leased.
    @Test func aStatementPreparedInAnAbortedTransactionFailsAsItselfAndWorksInTheNext() async throws {
        try await withPool(statementTimeout: .seconds(30)) { database, _, _, logger in
            let failure = await #expect(throws: PSQLError.self) {
                try await database.transaction(logger: logger) { connection in
                    _ = try? await connection.query("SELECT 1 / 0", logger: logger)
                    return try await database.execute(ProbeSQL(), on: connection, logger: logger)
                }
            }
            #expect(failure.flatMap { ServerError.sqlState(of: $0) } == "25P02")
            #expect(database.usage.snapshot.inUse == 0)
            #expect(database.usage.replaced == 0, "replaced at its next lease, not at once")
            let rows = try await database.execute(ProbeSQL(), logger: logger)
            #expect(try rows.first.map { try $0.decode(Int64.self) } == 0)
            #expect(database.usage.replaced == 1)
            _ = try await database.execute(ProbeSQL(), logger: logger)
            #expect(database.usage.replaced == 1, "the mark is taken once")
        }
    }

    /// A deploy's migration holding a table past `statement_timeout` while a pool prepares.
    @Test func aStatementPreparedWhileItsTableWasLockedWorksOnceTheLockIsGone() async throws {
        try await withPool(statementTimeout: .milliseconds(300)) { database, _, admin, logger in
            let locked = Gate(), release = Gate()
            defer { release.open() }
            let holder = Task {
                defer { locked.open() }
                try await admin.withConnection { connection in
                    try await connection.query("BEGIN", logger: logger)
                    try await connection.query("LOCK TABLE users IN ACCESS EXCLUSIVE MODE", logger: logger)
                    locked.open()
                    await release.wait()
                    try await connection.query("COMMIT", logger: logger)
                }
            }
            await locked.wait()
            let failure = await #expect(throws: PSQLError.self) { try await database.execute(ProbeSQL(), logger: logger) }
            #expect(failure.flatMap { ServerError.sqlState(of: $0) } == "57014")
            release.open()
            try await holder.value
            let rows = try await database.execute(ProbeSQL(), logger: logger)
            #expect(try rows.first.map { try $0.decode(Int64.self) } == 0)
            #expect(database.usage.replaced == 1)
        }
    }

    /// After a lock held past the timeout, a whole pool may be spoilt: a call still gets a
    /// connection, however many it must close first (more than the attempts a closed one gets).
    @Test func aCallGetsAConnectionWhenEveryPooledOneIsSpoilt() async throws {
        let size = Database.closedLeaseAttempts + 1
        try await withPool(size: size, statementTimeout: .seconds(30)) { database, pool, _, logger in
            // Nested, so that each lease is another connection.
            @Sendable func spoil(_ left: Int) async throws {
                guard left > 0 else { return }
                try await pool.withConnection { connection in
                    FailedPreparation.mark(connection)
                    try await spoil(left - 1)
                }
            }
            try await spoil(size)
            let rows = try await database.execute(ProbeSQL(), logger: logger)
            #expect(try rows.first.map { try $0.decode(Int64.self) } == 0)
            // Each spoilt one it was handed, at least one: the pool may open a fresh one first.
            #expect((1...size).contains(database.usage.replaced))
        }
    }

    /// `body` with a `Database` over a pool of `size` connections, one already opened (so what
    /// the first two tests prepare is prepared on the connection the pool keeps), the pool, and
    /// the test database's admin pool.
    private func withPool(size: Int = 1, statementTimeout: Duration,
                          _ body: @Sendable (Database, PostgresClient, PostgresClient, Logger) async throws -> Void) async throws {
        try await withTestDatabase { settings, admin in
            let logger = Logger(label: "failed-preparation")
            let configuration = settings.clientConfiguration(poolSize: size, statementTimeout: statementTimeout)
            try await PostgresClient(configuration: configuration, backgroundLogger: logger).whileRunning { pool in
                let database = Database(client: pool, deadlines: .init(acquire: .seconds(30), statement: statementTimeout))
                _ = try await database.query("SELECT 1", logger: logger)
                try await body(database, pool, admin, logger)
            }
        }
    }
}

private struct ProbeSQL: PreparedSQL {
    static let name = "bookworm_test_failed_preparation"
    static let sql = "SELECT count(*) FROM users WHERE username = 'nobody at all'"
    static var bindingDataTypes: [PostgresDataType] { [] }
    let values: [SQLValue] = []
}
