import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// The tests may run against a shared server (`TEST_DATABASE_URL`): a run drops only the
/// databases it created itself, never another run's or anyone else's.
@Suite struct TestDatabaseTests {
    @Test func aTestRunDropsOnlyTheDatabasesItCreated() async throws {
        let server = TestDatabaseServer.shared
        let admin = try await server.adminSettings()
        let foreign = "test_other" + String(UUID().uuidString.lowercased().prefix(6)) + "_kept"
        let logger = Logger(label: "test-database-test")
        try await admin.makeClient(poolSize: 1, logger: logger).whileRunning { client in
            try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(foreign)"))
            let own = try await server.createDatabase()
            #expect(own.database.hasPrefix(TestDatabaseServer.prefix))
            await server.dropDatabase(own)
            await server.dropDatabase(admin.withDatabase(foreign))
            let foreignKept = try await Self.exists(foreign, client), ownKept = try await Self.exists(own.database, client)
            #expect(foreignKept && !ownKept)
            // What a run sweeps as a crashed run's leftovers on a shared server: its own names only.
            let pattern = TestDatabaseServer.leftovers(sharedServer: true)
            let swept = try await client.query("SELECT \(foreign) LIKE \(pattern), \(TestDatabaseServer.template) LIKE \(pattern)")
            for try await (other, template) in swept.decode((Bool, Bool).self) { #expect(!other && template) }
            try await client.query(PostgresQuery(unsafeSQL: "DROP DATABASE \(foreign) WITH (FORCE)"))
        }
    }

    private static func exists(_ name: String, _ client: PostgresClient) async throws -> Bool {
        for try await count in try await client.query("SELECT count(*)::int8 FROM pg_database WHERE datname = \(name)").decode(Int.self) {
            return count == 1
        }
        return false
    }
}
