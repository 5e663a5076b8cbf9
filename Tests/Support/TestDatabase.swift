import Foundation
import Logging
import PostgresNIO
@testable import BookwormCore
@testable import Mail
@testable import Accounts
@testable import Places
@testable import Catalog
@testable import Discovery
@testable import Exchange
@testable import BookwormApp

/// One PostgreSQL per test process (`TEST_DATABASE_URL`, else an embedded cluster under
/// `.bookworm/test`), one migrated template database, and a fresh database per test cloned
/// from it, so tests run in parallel without sharing state. Every database a run creates is
/// named `test_<run>_…`, and a run drops only those: a shared server's other databases, another
/// run's among them, are never touched (`make test` drops the run's template afterwards).
actor TestDatabaseServer {
    static let shared = TestDatabaseServer()
    /// `BOOKWORM_TEST_RUN` (set by `make test`), else one of this process's own.
    static let run: String = {
        let given = ProcessInfo.processInfo.environment["BOOKWORM_TEST_RUN"] ?? ""
        let safe = !given.isEmpty && given.count <= 16 && given.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
        return safe ? given.lowercased() : String(UUID().uuidString.lowercased().prefix(8))
    }()
    static let prefix = "test_\(run)_"
    static let template = prefix + "template"
    static var sharedServer: Bool { !(ProcessInfo.processInfo.environment["TEST_DATABASE_URL"] ?? "").isEmpty }

    private var setup: Task<(DatabaseSettings, PostgresClient), any Error>?
    let logger: Logger = {
        var logger = Logger(label: "tests")
        logger.logLevel = .error
        return logger
    }()

    /// Settings for the server's maintenance database, starting the server on first use.
    func adminSettings() async throws -> DatabaseSettings {
        try await adminConnection().0
    }

    /// Every test asks at once; the first one's set-up task is shared by all.
    private func adminConnection() async throws -> (DatabaseSettings, PostgresClient) {
        if let setup { return try await setup.value }
        let task = Task { try await self.startServer() }
        setup = task
        return try await task.value
    }

    private func startServer() async throws -> (DatabaseSettings, PostgresClient) {
        let settings: DatabaseSettings
        if let url = ProcessInfo.processInfo.environment["TEST_DATABASE_URL"], !url.isEmpty {
            settings = try DatabaseSettings(url: url)
        } else {
            // Tests run in parallel, each with its own pools: at peak they held more than 300
            // connections, and a PostgresNIO pool refused with "too many clients" did not recover
            // (every test waiting, none failing). Room for all of them, whatever the cluster's age.
            // Every test database adds its own statement entries; at the default 5,000 the oldest
            // were evicted mid-test and a statement count went down.
            let embedded = EmbeddedPostgres(dataDirectory: Self.dataDirectory, logger: logger, fastAndLoose: true,
                                            serverOptions: "-c shared_preload_libraries=pg_stat_statements -c max_connections=1000"
                                                + " -c pg_stat_statements.max=100000")
            settings = try await embedded.start(database: "postgres")
        }
        try await rebuildTemplate(admin: settings)
        let client = settings.makeClient(poolSize: 4, logger: logger)
        Task.detached { await client.run() }
        return (settings, client)
    }

    static var dataDirectory: String {
        ProcessInfo.processInfo.environment["BOOKWORM_TEST_DATA_DIR"] ?? ".bookworm/test"
    }

    /// A new, migrated, empty database of its own.
    func createDatabase() async throws -> DatabaseSettings {
        let (admin, client) = try await adminConnection()
        let name = Self.prefix + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        // A template must have no session: the migrating one may still be closing on the server
        // (55006 object_in_use), so try again briefly rather than fail the test.
        for attempt in 1...50 {
            do {
                try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name) TEMPLATE \(Self.template)"))
                break
            } catch let error as PSQLError where error.serverInfo?[.sqlState] == "55006" && attempt < 50 {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        return admin.withDatabase(name)
    }

    /// A new database with no schema at all, for migrator tests.
    func createEmptyDatabase() async throws -> DatabaseSettings {
        let (admin, client) = try await adminConnection()
        let name = Self.prefix + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        return admin.withDatabase(name)
    }

    func dropDatabase(_ settings: DatabaseSettings) async {
        let name = settings.database
        guard name.hasPrefix(Self.prefix) else { return }
        guard let client = try? await adminConnection().1 else { return }
        _ = try? await client.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
    }

    /// The `LIKE` pattern of the databases a run may drop as a crashed run's leftovers.
    static func leftovers(sharedServer: Bool) -> String {
        (sharedServer ? prefix : "test_").replacingOccurrences(of: "_", with: "\\_") + "%"
    }

    private func rebuildTemplate(admin: DatabaseSettings) async throws {
        let logger = self.logger
        let client = admin.makeClient(poolSize: 1, logger: logger)
        try await client.whileRunning { client in
            // Leftovers of a crashed run: on the tests' own cluster every run's, on a shared
            // server only this run's.
            let pattern = Self.leftovers(sharedServer: Self.sharedServer)
            let stale = try await client.query("SELECT datname FROM pg_database WHERE datname LIKE \(pattern)")
            var names: [String] = []
            for try await name in stale.decode(String.self) { names.append(name) }
            for name in names {
                try await client.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
            }
            try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(Self.template)"))
        }
        let templateClient = admin.withDatabase(Self.template).makeClient(poolSize: 1, logger: logger)
        try await templateClient.whileRunning { client in
            try await Migrator.bundled().up(client: client, logger: logger)
        }
        // The migrating session ends on the server a moment after the client closes it.
        try await admin.makeClient(poolSize: 1, logger: logger).whileRunning { client in
            for _ in 0..<100 {
                let rows = try await client.query("SELECT count(*)::int8 FROM pg_stat_activity WHERE datname = \(Self.template)")
                var sessions = 0
                for try await count in rows.decode(Int.self) { sessions = count }
                if sessions == 0 { return }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }
}

/// Runs `body` with a fresh migrated database and a running client on it, then drops it.
func withTestDatabase<T: Sendable>(
    empty: Bool = false,
    _ body: @Sendable (DatabaseSettings, PostgresClient) async throws -> T
) async throws -> T {
    let server = TestDatabaseServer.shared
    let settings = try await TestPhases.during("creating its database") {
        empty ? try await server.createEmptyDatabase() : try await server.createDatabase()
    }
    let client = settings.makeClient(poolSize: 4, logger: server.logger)
    do {
        let result = try await TestPhases.during("running") { try await client.whileRunning { try await body(settings, $0) } }
        try await TestPhases.during("dropping its database") { await server.dropDatabase(settings) }
        return result
    } catch {
        try await TestPhases.during("dropping its database") { await server.dropDatabase(settings) }
        throw error
    }
}

extension Database {
    /// The deadlines every test uses: many tests share two cores, so a connection may take
    /// seconds to open (the outage tests set tight deadlines of their own).
    package static let testDeadlines = DatabaseDeadlines(acquire: .seconds(30), statement: .seconds(30))

    package static func forTests(_ client: PostgresClient) -> Database {
        Database(client: client, deadlines: testDeadlines)
    }

    /// Test queries log nowhere.
    @discardableResult
    package func query(_ query: PostgresQuery) async throws -> Rows {
        try await self.query(query, logger: Logger(label: "test-sql"))
    }
}
