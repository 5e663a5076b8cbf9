import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Mail
@testable import Accounts
@testable import Places
@testable import Catalog
@testable import Discovery
@testable import Exchange
@testable import BookwormApp
@testable import BookwormTestSupport

@Suite struct MigratorTests {
    let logger = Logger(label: "test")

    func tableExists(_ name: String, _ client: PostgresClient) async throws -> Bool {
        let rows = try await client.query("SELECT to_regclass(\(name)) IS NOT NULL")
        for try await exists in rows.decode(Bool.self) { return exists }
        return false
    }

    func appliedVersions(_ client: PostgresClient) async throws -> [Int] {
        var versions: [Int] = []
        for try await version in try await client.query("SELECT version FROM schema_migrations ORDER BY version").decode(Int.self) {
            versions.append(version)
        }
        return versions
    }

    @Test func freshDatabaseGetsEveryBundledMigration() async throws {
        try await withTestDatabase(empty: true) { _, client in
            let migrator = try Migrator.bundled()
            #expect(!migrator.migrations.isEmpty)
            let applied = try await migrator.up(client: client, logger: logger)
            #expect(applied.map(\.version) == migrator.migrations.map(\.version))
            #expect(try await tableExists("users", client))
            #expect(try await migrator.pending(client: client, logger: logger).isEmpty)
            let states = try await migrator.status(client: client, logger: logger)
            #expect(states.allSatisfy { $0.appliedAt != nil && $0.checksumMatches == true })
        }
    }

    @Test func runningUpAgainAppliesNothing() async throws {
        try await withTestDatabase(empty: true) { _, client in
            let migrator = try Migrator.bundled()
            try await migrator.up(client: client, logger: logger)
            let second = try await migrator.up(client: client, logger: logger)
            #expect(second.isEmpty)
            #expect(try await appliedVersions(client) == migrator.migrations.map(\.version))
        }
    }

    @Test func verifyDetectsAnAppliedFileThatChanged() async throws {
        try await withTestDatabase(empty: true) { _, client in
            let original = Migrator(migrations: [Migration(version: 1, name: "one", sql: "CREATE TABLE one (id int)")])
            try await original.up(client: client, logger: logger)
            try await original.verify(client: client, logger: logger)
            let edited = Migrator(migrations: [Migration(version: 1, name: "one", sql: "CREATE TABLE one (id bigint)")])
            await #expect(throws: MigrationError.self) { try await edited.verify(client: client, logger: logger) }
            let states = try await edited.status(client: client, logger: logger)
            #expect(states.first?.checksumMatches == false)
        }
    }

    @Test func concurrentUpRunsApplyEachFileOnce() async throws {
        try await withTestDatabase(empty: true) { settings, _ in
            // Not idempotent on purpose: applying either file twice would fail.
            let migrator = Migrator(migrations: [
                Migration(version: 1, name: "a", sql: "CREATE TABLE a (id int); SELECT pg_sleep(0.3)"),
                Migration(version: 2, name: "b", sql: "CREATE TABLE b (id int)"),
            ])
            let clientA = settings.makeClient(poolSize: 1, logger: logger)
            let clientB = settings.makeClient(poolSize: 1, logger: logger)
            async let first = clientA.whileRunning { try await migrator.up(client: $0, logger: logger).count }
            async let second = clientB.whileRunning { try await migrator.up(client: $0, logger: logger).count }
            let counts = try await [first, second]
            #expect(counts.sorted() == [0, 2])
            let check = settings.makeClient(poolSize: 1, logger: logger)
            let versions = try await check.whileRunning { try await appliedVersions($0) }
            #expect(versions == [1, 2])
        }
    }

    @Test func failingFileRollsBackAndReportsPostgresMessage() async throws {
        try await withTestDatabase(empty: true) { _, client in
            let migrator = Migrator(migrations: [
                Migration(version: 1, name: "good", sql: "CREATE TABLE good (id int)"),
                Migration(version: 2, name: "bad", sql: "CREATE TABLE half (id int);\nINSERT INTO nowhere VALUES (1);"),
            ])
            do {
                try await migrator.up(client: client, logger: logger)
                Issue.record("a failing migration must throw")
            } catch let error as MigrationError {
                #expect(error.description.contains("0002_bad"))
                #expect(error.description.contains("relation \"nowhere\" does not exist"))
            }
            #expect(try await tableExists("good", client))
            #expect(try await tableExists("half", client) == false)
            #expect(try await appliedVersions(client) == [1])
        }
    }

    @Test func serveRefusesToStartWithPendingMigrationsAndNamesThem() async throws {
        try await withTestDatabase(empty: true) { settings, _ in
            // Refused while building, before any service (worker, housekeeping) could start.
            do {
                let app = try await buildApplication(config: .forTests(settings))
                try await app.test(.router) { _ in }
                Issue.record("the app must refuse to start")
            } catch let error as MigrationError {
                #expect(error.description.contains("0001_accounts"))
            }
        }
    }

    @Test func serveWithMigrateFlagAppliesPendingMigrations() async throws {
        try await withTestDatabase(empty: true) { settings, client in
            var config = Config.forTests(settings)
            config.migrateOnStart = true
            let app = try await buildApplication(config: config)
            try await app.test(.router) { client in
                let response = try await client.executeRequest(uri: "/health/ready", method: .get, headers: [:], body: nil)
                #expect(response.status == .ok)
            }
            #expect(try await tableExists("users", client))
        }
    }

    @Test(arguments: [
        ("CREATE TABLE a (x text DEFAULT ';'); CREATE TABLE b (y int)", 2),
        ("-- a comment; with a semicolon\nSELECT 1;", 1),
        ("CREATE FUNCTION f() RETURNS int AS $$ SELECT 1; $$ LANGUAGE sql; SELECT 2", 2),
        ("CREATE FUNCTION g() RETURNS int AS $body$ BEGIN RETURN 1; END $body$ LANGUAGE plpgsql", 1),
        ("SELECT 'it''s; fine'; /* block; comment */ SELECT \"odd;name\" FROM t", 2),
        ("  ;  ; ", 0),
    ])
    func sqlScriptSplitsOnlyOnStatementSemicolons(script: String, count: Int) {
        #expect(SQLScript.statements(script).count == count)
    }
}
