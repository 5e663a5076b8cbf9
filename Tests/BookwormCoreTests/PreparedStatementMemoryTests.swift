import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// PostgresNIO remembers a PREPARE that failed for as long as the connection lives, so a
/// replica's connection that prepared a statement before a migration was replayed fails it
/// forever; `ReplicaFallback.read` closes such a connection (and `FailedPreparation` marks one
/// that a timeout or an aborted transaction spoilt). When this test fails,
/// PostgresNIO prepares again, and both can go.
@Suite struct PreparedStatementMemoryTests {
    struct CountLater: PostgresPreparedStatement {
        static let name = "bookworm_test_count_later"
        static let sql = "SELECT count(*)::int8 FROM later_table"
        typealias Row = Int
        func makeBindings() -> PostgresBindings { PostgresBindings() }
        func decodeRow(_ row: PostgresRow) throws -> Int { try row.decode(Int.self) }
    }

    static func count(_ connection: PostgresConnection, _ logger: Logger) async throws -> [Int] {
        var counts: [Int] = []
        for try await count in try await connection.execute(CountLater(), logger: logger) { counts.append(count) }
        return counts
    }

    @Test func aFailedPrepareIsRememberedByTheConnection() async throws {
        try await withTestDatabase { _, client in
            let logger = Logger(label: "prepare")
            try await client.withConnection { connection in
                let before = await #expect(throws: PSQLError.self) { _ = try await Self.count(connection, logger) }
                #expect(before.flatMap { ServerError.sqlState(of: $0) } == "42P01")
                try await connection.query("CREATE TABLE later_table (id int)", logger: logger)
                // The table is there now, and a plain query sees it; the prepared statement still fails.
                _ = try await connection.query("SELECT count(*) FROM later_table", logger: logger).collect()
                let after = await #expect(throws: PSQLError.self) { _ = try await Self.count(connection, logger) }
                #expect(after.flatMap { ServerError.sqlState(of: $0) } == "42P01")
            }
        }
    }

    /// A replica that has not replayed a migration (here: a database without the table) is not
    /// an error for the reader: the primary answers.
    @Test func aReadNamingWhatTheReplicaLacksIsAnsweredByThePrimary() async throws {
        let logger = Logger(label: "replica-schema")
        try await withTestDatabase { _, primaryClient in
            try await primaryClient.query("CREATE TABLE later_table (id int)", logger: logger)
            try await primaryClient.query("INSERT INTO later_table VALUES (1), (2), (3)", logger: logger)
            try await withTestDatabase { _, replicaClient in
                let replica = Database.readReplica(client: replicaClient, primary: Database(client: primaryClient))
                let first = try await replica.execute(CountLater(), logger: logger)
                #expect(first == [3])
                // Resting now, the replica is not asked again at once; the answer is the primary's still.
                let second = try await replica.execute(CountLater(), logger: logger)
                #expect(second == [3])
            }
        }
    }
}
