import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormApp
@testable import BookwormCore
@testable import BookwormTestSupport

/// What the app's own pools set on every connection, read back from the server.
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

    /// The nearby statements' way: on the app's generic pool, a statement is planned
    /// generically by the connection's own setting (sent when it connected: source "client");
    /// without that pool, by `SET LOCAL` after `BEGIN` (source "session"), three round trips more.
    @Test func statementsHeldToTheirGenericPlanRunOnTheGenericPoolWithoutSetLocal() async throws {
        try await withApp { app in
            let logger = Logger(label: "pool-settings-test")
            let (database, clients) = pools(app.settings, config: .forTests(app.settings), logger: logger)
            try await withThrowingDiscardingTaskGroup { group in
                for client in clients { group.addTask { await client.run() } }
                defer { group.cancelAll() }
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

    private struct PlanModeProbe: PreparedSQL {
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
