import Foundation
import Logging
import PostgresNIO
import Testing
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
