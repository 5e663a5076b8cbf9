import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
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

    /// A delete that follows a foreign key without an index on it reads the whole referencing
    /// table once per row deleted. Books are never deleted.
    @Test func everyForeignKeyADeleteFollowsHasAnIndexOnItsColumns() async throws {
        try await withApp { app in
            let rows = try await app.db.query("""
                SELECT c.conrelid::regclass::text || ' (' || c.conname || ')' FROM pg_constraint c
                WHERE c.contype = 'f' AND c.confrelid <> 'books'::regclass AND NOT EXISTS (
                    SELECT 1 FROM pg_index i
                    WHERE i.indrelid = c.conrelid AND (i.indkey::int2[])[0:array_length(c.conkey, 1) - 1] = c.conkey
                      -- A partial index serves the delete's lookup only if it leaves out nulls alone.
                      AND (i.indpred IS NULL OR pg_get_expr(i.indpred, i.indrelid) =
                           '(' || (SELECT attname FROM pg_attribute WHERE attrelid = c.conrelid AND attnum = c.conkey[1]) || ' IS NOT NULL)'))
                ORDER BY 1
                """).decode(String.self)
            var unindexed: [String] = []
            for try await name in rows { unindexed.append(name) }
            #expect(unindexed.isEmpty, "\(unindexed)")
        }
    }

    /// A volatile function written in SQL (one that writes is volatile) cannot be inlined: it is
    /// parsed and planned again at every call, and triggers call ours once per row. PL/pgSQL
    /// keeps its plans.
    @Test func noVolatileFunctionOfOursIsWrittenInSQL() async throws {
        try await withApp { app in
            let rows = try await app.db.query("""
                SELECT p.proname::text FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
                WHERE l.lanname = 'sql' AND p.provolatile = 'v' AND p.pronamespace = 'public'::regnamespace
                  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
                ORDER BY 1
                """).decode(String.self)
            var planEveryCall: [String] = []
            for try await name in rows { planEveryCall.append(name) }
            #expect(planEveryCall.isEmpty, "\(planEveryCall)")
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
        try await withTestDatabase(empty: true) { settings, db in
            // File 1 waits on a lock this test holds, so one runner is provably inside the
            // migration while the other waits for the migrator's lock. Not idempotent on purpose:
            // applying either file twice would fail.
            let gate = 4242
            let migrator = Migrator(migrations: [
                Migration(version: 1, name: "a", sql: "CREATE TABLE a (id int); SELECT pg_advisory_xact_lock(\(gate))"),
                Migration(version: 2, name: "b", sql: "CREATE TABLE b (id int)"),
            ])
            let holder = settings.makeClient(poolSize: 1, logger: logger)
            try await holder.whileRunning { holder in
                try await holder.withConnection { gateConnection in
                    try await gateConnection.query("SELECT pg_advisory_lock(\(gate))", logger: logger)
                    let runners = Task {
                        await withTaskGroup(of: Result<Int, any Error>.self) { group in
                            for _ in 0..<2 {
                                group.addTask {
                                    await outcome {
                                        try await settings.makeClient(poolSize: 1, logger: logger)
                                            .whileRunning { try await migrator.up(client: $0, logger: logger).count }
                                    }
                                }
                            }
                            return await group.reduce(into: []) { $0.append($1) }
                        }
                    }
                    // Both runners are in the database at once: one blocked on the gate inside
                    // file 1, the other on the migrator's own lock.
                    let bothWaiting = try await eventually(within: 20) {
                        // A bigint advisory key shows as classid (high half) and objid (low half).
                        let rows = try await db.query("""
                            WITH waiting AS (
                                SELECT (classid::int8 << 32) | objid::int8 AS key FROM pg_locks
                                WHERE locktype = 'advisory' AND objsubid = 1 AND NOT granted
                                  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                            )
                            SELECT count(*) FILTER (WHERE key = \(Int64(gate)))::int8,
                                   count(*) FILTER (WHERE key = \(Migrator.lockKey))::int8
                            FROM waiting
                            """)
                        for try await (atGate, atMigrator) in rows.decode((Int, Int).self) { return atGate == 1 && atMigrator == 1 }
                        return false
                    }
                    #expect(bothWaiting)
                    try await gateConnection.query("SELECT pg_advisory_unlock(\(gate))", logger: logger)
                    let counts = await runners.value.map { try? $0.get() }
                    #expect(counts.compactMap { $0 }.sorted() == [0, 2])
                }
            }
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

/// The value or the error, so one runner's failure neither hides nor cancels the other's.
private func outcome(_ body: () async throws -> Int) async -> Result<Int, any Error> {
    do { return .success(try await body()) } catch { return .failure(error) }
}
