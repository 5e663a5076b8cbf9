import Foundation
import Logging
import NIOPosix
import PostgresNIO
import Testing
@testable import BookwormApp
@testable import BookwormCore
@testable import BookwormTestSupport

/// What the app's own pools set on every connection, read back from the server, and how long
/// they keep one idle.
@Suite struct PoolSettingsTests {
    @Test func theAppsPoolsHaveAStatementTimeoutAndNoJITAndAdminClientsKeepTheServersDefaults() async throws {
        try await withApp { app in
            let logger = Logger(label: "pool-settings-test")
            let appPool = PostgresClient(configuration: app.settings.clientConfiguration(poolSize: 1, statementTimeout: .seconds(5)),
                                         backgroundLogger: logger)
            let settings = try await appPool.whileRunning { client in try await Self.settings(client, logger) }
            #expect(settings == ["jit": "off", "statement_timeout": "5s"])
            let admin = try await app.settings.makeClient(poolSize: 1, logger: logger).whileRunning { client in
                try await Self.settings(client, logger)
            }
            #expect(admin == ["jit": "on", "statement_timeout": "0"])
        }
    }

    /// When this fails, swiftlang/swift#60441 may be fixed, and the pools' idle timeout may go
    /// back to PostgresNIO's minute (`DatabaseSettings.clientConfiguration`), once a look at a
    /// server's memory under load confirms it: a connection parked with an idle timer that the
    /// next lease cancels still holds the timer's memory until its deadline, so a process's RSS
    /// grows with every query for as long as the timeout (300 s here, so that a slow machine's
    /// window ends before the first timer does).
    @Test func aCancelledIdleTimerStillHoldsItsMemoryUntilItsDeadline() async throws {
        try await withTestDatabase { settings, _ in
            let server = try await ServerProcess(databaseURL: settings.connectionURL, environment: ["BOOKWORM_DB_IDLE_SECONDS": "300"])
            defer { server.stop() }
            let port = server.port, pid = server.pid
            let grown = try await offThePool {
                let token = try ImportBudgetTests.register(port: port)
                let socket = try RawSocket(port: port)
                let request = "GET /v1/me/pins HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n\r\n"
                func ask(_ times: Int) throws {
                    for _ in 0..<times {
                        try socket.send(request)
                        let status = socket.readResponse(timeout: 10)?.status
                        guard status == 200 else { throw TestFailure("GET /v1/me/pins answered \(String(describing: status))") }
                    }
                }
                try ask(300)
                let start = try ImportBudgetTests.memory(pid, "VmRSS")
                try ask(1_000)
                return try ImportBudgetTests.memory(pid, "VmRSS") - start
            }
            #expect(grown > 300 << 10, "RSS grew \(grown) bytes over 1,000 queries")
        }
    }

    /// `BOOKWORM_DB_IDLE_SECONDS` reaches a server's pools: with 1, the connections that answered
    /// a request are closed well before the default ten seconds (those held on LISTEN stay).
    @Test func aServersPoolsCloseConnectionsIdleForBookwormDBIdleSeconds() async throws {
        let anywhere = DatabaseSettings(endpoint: .socket(path: "/nowhere/.s.PGSQL.5432"), username: "u", password: nil, database: "d")
        #expect(anywhere.clientConfiguration(poolSize: 1).options.connectionIdleTimeout == DatabaseSettings.defaultIdleTimeout)
        #expect(anywhere.clientConfiguration(poolSize: 1, idleTimeout: .seconds(7)).options.connectionIdleTimeout == .seconds(7))
        try await withTestDatabase { settings, client in
            let server = try await ServerProcess(databaseURL: settings.connectionURL, environment: ["BOOKWORM_DB_IDLE_SECONDS": "1"])
            defer { server.stop() }
            let port = server.port
            _ = try await offThePool { try ImportBudgetTests.register(port: port) }
            try await client.withConnection { connection in
                let closed = try await eventually(within: 7) {
                    let rows = try await connection.query("""
                        SELECT count(*)::int8 FROM pg_stat_activity
                        WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
                          AND query NOT LIKE 'LISTEN%'
                        """, logger: Logger(label: "pool-settings-test"))
                    for try await count in rows.decode(Int64.self) { return count == 0 }
                    return false
                }
                #expect(closed, "the server's pooled connections were still open 7 s after its last request")
            }
        }
    }

    @Test func theDatabaseIdleTimeoutIsTenSecondsUnlessBookwormDBIdleSecondsIsSet() throws {
        #expect(try Config.fromEnvironment([:]).databaseIdleTimeout == .seconds(10))
        #expect(try Config.fromEnvironment(["BOOKWORM_DB_IDLE_SECONDS": "300"]).databaseIdleTimeout == .seconds(300))
        for bad in ["0", "-5", "301", "soon"] {
            #expect(throws: ConfigError.self, "\(bad)") { try Config.fromEnvironment(["BOOKWORM_DB_IDLE_SECONDS": bad]) }
        }
    }

    /// The nearby statements' way: on the app's generic pool, a statement is planned
    /// generically by the connection's own setting (sent when it connected: source "client");
    /// without that pool, by `SET LOCAL` after `BEGIN` (source "session"), three round trips more.
    @Test func statementsHeldToTheirGenericPlanRunOnTheGenericPoolWithoutSetLocal() async throws {
        try await withApp { app in
            let logger = Logger(label: "pool-settings-test")
            try await Self.withRunningPools(app) { database in
                let pooled = try await database.executeOnGenericPlan(PlanModeProbe(), on: nil, logger: logger)
                    .map { try $0.decode((String, String).self) }
                #expect(pooled.map(\.0) == ["force_generic_plan"])
                #expect(pooled.map(\.1) == ["client"])
                let plain = Database(client: database.client, deadlines: database.deadlines)
                let wrapped = try await plain.executeOnGenericPlan(PlanModeProbe(), on: nil, logger: logger)
                    .map { try $0.decode((String, String).self) }
                #expect(wrapped.map(\.0) == ["force_generic_plan"])
                #expect(wrapped.map(\.1) == ["session"])
            }
        }
    }

    @Test func theNearbyPoolIsAQuarterOfThePoolAndBesideTheEmbeddedClusterAtMostTwoForEachEventLoop() throws {
        let loops = LoopExecutor.loops.count
        let external = ["DATABASE_URL": "postgres://bookworm@db.example/bookworm"]
        #expect(try Config.fromEnvironment(external.merging(["BOOKWORM_DB_POOL_SIZE": "40"]) { $1 }).genericPoolSize == 10)
        #expect(try Config.fromEnvironment(external.merging(["BOOKWORM_DB_POOL_SIZE": "4"]) { $1 }).genericPoolSize == 2)
        #expect(try Config.fromEnvironment(["BOOKWORM_DB_POOL_SIZE": "40"]).genericPoolSize == max(2, min(10, 2 * loops)))
        #expect(try Config.fromEnvironment(["BOOKWORM_DB_POOL_SIZE": "1"]).genericPoolSize == 2)
        for environment in [external, [:]] {
            let set = environment.merging(["BOOKWORM_DB_GENERIC_POOL_SIZE": "7"]) { $1 }
            #expect(try Config.fromEnvironment(set).genericPoolSize == 7)
        }
        for bad in ["0", "-1", "many", "1001"] {
            #expect(throws: ConfigError.self, "\(bad)") { try Config.fromEnvironment(["BOOKWORM_DB_GENERIC_POOL_SIZE": bad]) }
        }
    }

    /// The size is the pool's: nine statements at once share its three connections (the default
    /// for the tests' pool of four would be two).
    @Test func nearbyStatementsRunOnAtMostTheGenericPoolsConnections() async throws {
        try await withApp { app in
            let logger = Logger(label: "pool-settings-test")
            try await Self.withRunningPools(app, genericPoolSize: 3) { database in
                let backends = try await Self.backends(of: 9, connections: 3, probes: database, gatedBy: app, logger: logger)
                #expect(backends.count == 3)
            }
        }
    }

    /// `BOOKWORM_DB_GENERIC_POOL_SIZE` is a maximum: five connections on sixteen event loops
    /// open five, and a statement from a loop without one of its own still runs.
    @Test func theGenericPoolNeverOpensMoreThanItsSizeWhenThereAreMoreEventLoops() async throws {
        let sizes = GenericPlanPool.sizes(5, loops: 16)
        #expect(sizes.count == 16 && sizes.reduce(0, +) == 5 && sizes.max() == 1)
        #expect(GenericPlanPool.sizes(7, loops: 2) == [4, 3])
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 16)
        defer { group.shutdownGracefully { _ in } }
        let loops = (0..<16).map { _ in group.next() }
        try await withApp { app in
            let logger = Logger(label: "pool-settings-test")
            try await Self.withRunningPools(app, genericPoolSize: 5, loops: loops) { database, clients in
                #expect(clients.count == 1 + 5)
                let backends = try await Self.backends(of: 20, connections: 5, probes: database, gatedBy: app, logger: logger)
                #expect(backends.count == 5)
                let last = try #require(loops.last)
                let generic = try #require(database.genericPlans)
                let chosen = try await last.submit { generic.database }.get()
                #expect(try await chosen.execute(PlanModeProbe(), logger: logger).count == 1)
            }
        }
    }

    /// A statement from an event loop's executor runs on a connection of that loop's own part of
    /// the pool, and its caller resumes on that loop: no thread but the loop's is woken.
    @Test func aNearbyStatementFromAnEventLoopUsesThatLoopsConnectionsAndResumesThere() async throws {
        try await withApp { app in
            let logger = Logger(label: "pool-settings-test")
            try await Self.withRunningPools(app, genericPoolSize: 2 * LoopExecutor.loops.count) { database in
                let generic = try #require(database.genericPlans)
                var backendsByLoop: [Set<Int32>] = []
                for loop in LoopExecutor.loops {
                    let executor = try #require(LoopExecutor.of(loop))
                    let backends = try await withTaskExecutorPreference(executor) {
                        try await Self.backends(of: 6, connections: 2, probes: database, gatedBy: app, logger: logger) {
                            let onLoop = try await generic.database.withConnection { $0.eventLoop === loop }
                            #expect(onLoop)
                        } after: {
                            #expect(loop.inEventLoop)
                        }
                    }
                    #expect(backends.count == 2)
                    backendsByLoop.append(backends)
                }
                #expect(Set(backendsByLoop.flatMap { $0 }).count == 2 * LoopExecutor.loops.count)
            }
        }
    }

    /// `body` with the app's pools (`pools`, the tests' config, the nearby pool's size if given) running.
    private static func withRunningPools(_ app: TestApp, genericPoolSize: Int? = nil,
                                         _ body: @Sendable (Database) async throws -> Void) async throws {
        try await withRunningPools(app, genericPoolSize: genericPoolSize, loops: LoopExecutor.loops) { database, _ in
            try await body(database)
        }
    }

    private static func withRunningPools(_ app: TestApp, genericPoolSize: Int?, loops: [any EventLoop],
                                         _ body: @Sendable (Database, [PostgresClient]) async throws -> Void) async throws {
        var config = Config.forTests(app.settings)
        config.databaseGenericPoolSize = genericPoolSize
        let (database, clients) = pools(app.settings, config: config, logger: Logger(label: "pool-settings-test"), loops: loops)
        try await withThrowingDiscardingTaskGroup { group in
            for client in clients { group.addTask { await client.run() } }
            defer { group.cancelAll() }
            try await body(database, clients)
        }
    }

    /// The backends `count` probes ran on, each in a child task of the caller's (its executor
    /// preference too), `before` and `after` around each. The probes wait at a gate, an advisory
    /// lock held on a connection of the app's own, until `connections` of them wait there at
    /// once: they overlap however long the pool takes to open its connections (probes that only
    /// slept a moment once all ran on one connection while the second was still starting).
    private static func backends(of count: Int, connections: Int, probes database: Database, gatedBy app: TestApp, logger: Logger,
                                 before: @escaping @Sendable () async throws -> Void = {},
                                 after: @escaping @Sendable () -> Void = {}) async throws -> Set<Int32> {
        try await app.db.client.withConnection { gate in
            try await gate.query("SELECT pg_advisory_lock(\(BackendProbe.gate))", logger: logger)
            return try await withThrowingTaskGroup(of: Int32.self) { statements in
                for _ in 0..<count {
                    statements.addTask {
                        try await before()
                        let pid = try await database.executeOnGenericPlan(BackendProbe(), on: nil, logger: logger).map { try $0.decode(Int32.self) }[0]
                        after()
                        return pid
                    }
                }
                // The gate opens whatever happens here, or the probes would wait for their deadline.
                do {
                    // Within the probes' own 30 s deadline, so that a pool that never opens its
                    // connections fails here, by name.
                    let overlapping = try await eventually(within: 20, interval: .milliseconds(10)) {
                        try await Self.waitingAtGate(gate, logger: logger) >= connections
                    }
                    #expect(overlapping, "\(connections) probes never waited at once")
                    #expect(try await Self.waitingAtGate(gate, logger: logger) == connections, "more probes at once than connections")
                } catch {
                    _ = try? await gate.query("SELECT pg_advisory_unlock(\(BackendProbe.gate))", logger: logger)
                    throw error
                }
                try await gate.query("SELECT pg_advisory_unlock(\(BackendProbe.gate))", logger: logger)
                return try await statements.reduce(into: Set<Int32>()) { $0.insert($1) }
            }
        }
    }

    /// Probes waiting at the gate, in this test's database (advisory locks are per database).
    private static func waitingAtGate(_ connection: PostgresConnection, logger: Logger) async throws -> Int {
        let rows = try await connection.query("""
            SELECT count(*)::int8 FROM pg_locks
            WHERE locktype = 'advisory' AND NOT granted AND objid = \(BackendProbe.gate)
              AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
            """, logger: logger)
        for try await count in rows.decode(Int64.self) { return Int(count) }
        return 0
    }

    /// Its backend, once the gate opens (a shared lock: every probe passes together).
    private struct BackendProbe: PreparedSQL {
        static let gate: Int64 = 4_711_042
        static let name = "bookworm_test_backend_probe"
        static let sql = "SELECT pg_backend_pid() FROM pg_advisory_xact_lock_shared(\(gate))"
        let values: [SQLValue] = []
    }

    private struct PlanModeProbe: PreparedSQL {
        static let name = "bookworm_test_plan_mode_probe"
        static let sql = "SELECT setting, source FROM pg_settings WHERE name = 'plan_cache_mode'"
        let values: [SQLValue] = []
    }

    private static func settings(_ client: PostgresClient, _ logger: Logger) async throws -> [String: String] {
        var values: [String: String] = [:]
        for name in ["jit", "statement_timeout"] {
            for try await value in try await client.query("SELECT current_setting(\(name))", logger: logger).decode(String.self) {
                values[name] = value
            }
        }
        return values
    }
}
