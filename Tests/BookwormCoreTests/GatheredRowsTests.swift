import Foundation
import Logging
import NIOCore
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// `GatheredRows`: rows gathered on the connection's event loop through PostgresNIO's older
/// `PreparedQuery`, for the statements read most. They must be the rows `execute` streams, byte
/// for byte, whatever that API's quirks; its errors must still read as outages where they are.
@Suite struct GatheredRowsTests {
    private static let logger = Logger(label: "gathered-rows-test")

    /// Rows of every shape the byte readers take, about 300 KB in all (many socket reads), and
    /// a second parameter the statement never uses, whose type only the declared types give.
    private static let wideSQL = """
        SELECT n, n::float8 / 7, n % 2 = 0, md5(n::text)::uuid, repeat(md5(n::text), 8),
               ARRAY[md5(n::text), 'ünïcødé'], timestamptz '2026-11-27 11:00:00+00' + n * interval '1 second',
               CASE WHEN n % 3 = 0 THEN NULL ELSE $1::text END
        FROM generate_series(1, 1000) n ORDER BY n
        """

    private struct Gathered: GatheredSQL {
        static let name = "bookworm_test_gathered"
        static let sql = GatheredRowsTests.wideSQL
        static var bindingDataTypes: [PostgresDataType] { [.text, .int8] }
        let values: [SQLValue]
    }

    private struct Streamed: PreparedSQL {
        static let name = "bookworm_test_streamed"
        static let sql = GatheredRowsTests.wideSQL
        static var bindingDataTypes: [PostgresDataType] { [.text, .int8] }
        let values: [SQLValue]
    }

    private struct Sleep: GatheredSQL {
        static let name = "bookworm_test_gathered_sleep"
        static let sql = "SELECT pg_sleep($1)"
        static var bindingDataTypes: [PostgresDataType] { [.float8] }
        let values: [SQLValue]
    }

    private struct Divide: GatheredSQL {
        static let name = "bookworm_test_gathered_divide"
        static let sql = "SELECT 1 / $1"
        static var bindingDataTypes: [PostgresDataType] { [.int8] }
        let values: [SQLValue]
    }

    @Test func gatheredRowsAreTheStreamedRowsByteForByte() async throws {
        try await withTestDatabase { _, client in
            let database = Database.forTests(client)
            let values: [SQLValue] = [.text("a parameter"), .int(nil)]
            let (gathered, streamed) = try await database.withConnection { connection in
                let gathered = try await GatheredRows().rows(of: Gathered(values: values), on: connection)
                var streamed: [PostgresRow] = []
                for try await row in try await connection.execute(Streamed(values: values), logger: Self.logger) { streamed.append(row) }
                return Transfer((Self.cells(gathered), Self.cells(streamed)))
            }.value
            #expect(gathered.count == 1000)
            #expect(gathered.first?.count == 8)
            #expect(gathered.count == streamed.count)
            #expect(zip(gathered, streamed).filter { $0 != $1 }.count == 0)
            // The byte readers take them as they take streamed rows.
            let first = PostgresRandomAccessRow(try #require(try await database.withConnection { connection in
                Transfer(try await GatheredRows().rows(of: Gathered(values: values), on: connection).first)
            }.value))
            #expect(try first.float8(1) == 1.0 / 7)
            #expect(try first.bool(2) == false)
            // And `decode` through `binary`, which corrects the format the older API misstates.
            #expect(try first.binary(0).decode(Int.self) == 1)
            #expect(try first.binary(3).decode(UUID.self) == first.uuid(3))
            #expect(try first.binary(5).decode([String].self).last == "ünïcødé")
            #expect(try first.binary(6).decode(Date.self) == Date(timeIntervalSince1970: 1_795_777_201))
            #expect(try first.binary(7).decode(String?.self) == "a parameter")
        }
    }

    @Test func aClosedConnectionsStatementsAreForgotten() async throws {
        try await withTestDatabase { settings, admin in
            let gathered = GatheredRows()
            try await settings.makeClient(poolSize: 1, logger: Self.logger).whileRunning { client in
                let database = Database.forTests(client)
                let (connection, pid) = try await database.withConnection { connection in
                    _ = try await gathered.rows(of: Divide(values: [.int(1)]), on: connection)
                    _ = try await gathered.rows(of: Divide(values: [.int(2)]), on: connection)
                    var pid: Int32 = 0
                    for try await found in try await connection.query("SELECT pg_backend_pid()", logger: Self.logger).decode(Int32.self) {
                        pid = found
                    }
                    return (connection, pid)
                }
                #expect(gathered.remembered == 1)
                try await admin.query("SELECT pg_terminate_backend(\(pid))", logger: Self.logger)
                try? await connection.closeFuture.get()
                #expect(gathered.remembered == 0)
            }
        }
    }

    @Test func aGatheredStatementPastTheServersTimeoutIsAnOutage() async throws {
        try await withTestDatabase { _, client in
            let database = Database.forTests(client)
            let thrown = try await database.withConnection { connection -> Transfer<(any Error)?> in
                try await connection.query("SET statement_timeout = '50ms'", logger: Self.logger)
                var thrown: (any Error)?
                do { _ = try await GatheredRows().rows(of: Sleep(values: [.double(5)]), on: connection) } catch { thrown = error }
                try await connection.query("RESET statement_timeout", logger: Self.logger)
                return Transfer(thrown)
            }.value
            let error = try #require(thrown)
            // The older API's error, which the outage check reads too.
            #expect(error is PostgresError, "\(error)")
            #expect(DatabaseOutage.matches(error), "\(error)")
        }
    }

    @Test func aGatheredStatementsOwnErrorIsNoOutage() async throws {
        try await withTestDatabase { _, client in
            let database = Database.forTests(client)
            await #expect(throws: PostgresError.self) {
                try await database.withConnection { connection in
                    Transfer(try await GatheredRows().rows(of: Divide(values: [.int(0)]), on: connection))
                }
            }
            do {
                _ = try await database.execute(Divide(values: [.int(0)]), logger: Self.logger)
                Issue.record("division by zero answered")
            } catch {
                #expect(!DatabaseOutage.matches(error), "\(error)")
            }
            // The connection is still good for the next statement.
            let rows = try await database.execute(Divide(values: [.int(1)]), logger: Self.logger)
            #expect(rows.count == 1)
        }
    }

    private struct Raise: GatheredSQL {
        static let name = "bookworm_test_gathered_raise"
        static let sql = "SELECT gathered_rows_raise($1)"
        static var bindingDataTypes: [PostgresDataType] { [.text] }
        let values: [SQLValue]
    }

    private struct StreamedRaise: PreparedSQL {
        static let name = "bookworm_test_streamed_raise"
        static let sql = "SELECT gathered_rows_raise($1)"
        static var bindingDataTypes: [PostgresDataType] { [.text] }
        let values: [SQLValue]
    }

    /// The server's errors read alike whichever API reported them: the outage check, a
    /// transaction's conflict, a replica's recovery conflict.
    @Test func theServersErrorsReadAlikeFromEitherAPI() async throws {
        try await withTestDatabase { _, client in
            let database = Database.forTests(client)
            try await database.query("""
                CREATE FUNCTION gathered_rows_raise(state text) RETURNS int LANGUAGE plpgsql
                AS $$ BEGIN RAISE EXCEPTION 'raised %', state USING ERRCODE = state; END $$
                """)
            // (state, outage, transaction conflict, replica conflict)
            let cases = [("40001", false, true, true), ("40P01", false, true, false), ("3D000", false, false, true),
                         ("57014", true, false, false), ("08006", true, false, false), ("22012", false, false, false)]
            for (state, outage, conflict, replica) in cases {
                let errors = try await database.withConnection { connection in
                    var errors: [any Error] = []
                    do { _ = try await GatheredRows().rows(of: Raise(values: [.text(state)]), on: connection) } catch { errors.append(error) }
                    do {
                        for try await _ in try await connection.execute(StreamedRaise(values: [.text(state)]), logger: Self.logger) {}
                    } catch { errors.append(error) }
                    return Transfer(errors)
                }.value
                #expect(errors.count == 2)
                #expect(errors.first is PostgresError && errors.last is PSQLError, "\(errors)")
                for error in errors {
                    #expect(ServerError.sqlState(of: error) == state)
                    #expect(DatabaseOutage.matches(error) == outage, "\(state): \(error)")
                    #expect(TransactionConflict.matches(error) == conflict, "\(state): \(error)")
                    #expect(ReplicaFallback.conflictsWithReplay(error) == replica, "\(state): \(error)")
                }
            }
        }
    }

    private struct Cell: Equatable {
        let type: PostgresDataType
        let bytes: [UInt8]?
    }

    /// Each cell's type and bytes.
    private static func cells(_ rows: [PostgresRow]) -> [[Cell]] {
        rows.map { row in
            let cells = PostgresRandomAccessRow(row)
            return (0..<cells.count).map { column in
                let data = cells[data: column]
                return Cell(type: data.type, bytes: data.value.map { Array($0.readableBytesView) })
            }
        }
    }
}
