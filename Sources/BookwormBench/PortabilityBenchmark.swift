import BookwormCore
import Foundation
import Logging
import Portability
import PostgresNIO

/// `BookwormBench portability`, on the catalog benchmark's data (1,000,000 copies, each a row of
/// the sync log): (a) a full sync over HTTP of a user with 10,000 objects; (b) the delta of 10
/// changes at the SQL level (the page statement `GET /v1/sync` runs), among every other user's
/// change rows; (c) a 10,000-line Goodreads import through the API and its worker: rows per
/// second, and another user's request latency while it runs.
struct PortabilityBenchmark {
    let objects: Int
    let changes: Int
    let runs: Int
    let lines: Int
    let port: Int
    static let syncer = "bench_syncer", importer = "bench_importer", reader = "bench_reader"

    func run() async throws {
        let tools = try LoadTools.find()
        let server = try ServerUnderTest.start(port: port)
        defer { server.stop() }
        let database = server.database(psql: tools.psql)
        guard try database.scalar("SELECT count(*) FROM copies") >= 1_000_000 else {
            throw Shell.Failure(description: "seed first: `BookwormBench catalog`")
        }
        let base = "http://127.0.0.1:\(port)"
        let token = try BenchAccount.token(curl: tools.curl, base: base, username: Self.syncer)
        let owned = try database.scalar("SELECT count(*) FROM copies c JOIN users u ON u.id = c.owner_id WHERE u.username = '\(Self.syncer)'")
        if owned < objects {
            print("seeding \(objects - owned) copies for \(Self.syncer)…")
            try database.execute("""
                INSERT INTO copies (owner_id, book_id, condition)
                SELECT (SELECT id FROM users WHERE username = '\(Self.syncer)'), b.id, 'good'
                FROM (SELECT id FROM books ORDER BY id LIMIT \(objects - owned)) b
                """)
        }
        try database.execute("ANALYZE sync_changes")
        let logRows = try database.scalar("SELECT count(*) FROM sync_changes")
        let full = try fullSync(token: token)
        let delta = try await server.clientSettings.makeClient(poolSize: 2, logger: Logger(label: "bench")).whileRunning { client in
            try await deltaSync(client: client, database: database, since: full.next)
        }
        let imported = try await importFile(tools: tools, base: base, database: database)
        let storm = try await importStorm(tools: tools, base: base, server: server)
        report(logRows: logRows, full: full, delta: delta, imported: imported, storm: storm)
    }

    struct FullSync {
        var objects = 0
        var pages = 0
        var seconds = 0.0
        var next = ""
    }

    /// Pages of 1,000 from no token to `has_more: false`, as a new phone would.
    private func fullSync(token: String) throws -> FullSync {
        let connection = try BenchHTTPConnection(port: port)
        var result = FullSync()
        var since: String?
        let begun = ContinuousClock.now
        while true {
            let page = try connection.send("GET", "/v1/sync?limit=1000" + (since.map { "&since=\($0)" } ?? ""), token: token)
            guard page.status == 200, let object = try JSONSerialization.jsonObject(with: Data(page.body.utf8)) as? [String: Any] else {
                throw Shell.Failure(description: "sync: \(page.status) \(page.body.prefix(200))")
            }
            result.objects += (object["changes"] as? [Any])?.count ?? 0
            result.pages += 1
            since = object["next"] as? String
            if object["has_more"] as? Bool != true { break }
        }
        result.seconds = (ContinuousClock.now - begun).milliseconds / 1000
        result.next = since ?? ""
        return result
    }

    struct Delta {
        var timings: [Double] = []
        var rows = 0
    }

    /// `changes` copies change; the page statement after the full sync's token, `runs` times.
    private func deltaSync(client: PostgresClient, database: BenchDatabase, since: String) async throws -> Delta {
        try database.execute("""
            UPDATE copies SET notes = 'changed ' || clock_timestamp() WHERE id IN (
                SELECT c.id FROM copies c JOIN users u ON u.id = c.owner_id WHERE u.username = '\(Self.syncer)' ORDER BY c.id LIMIT \(changes))
            """)
        guard let token = try? SyncToken(encoded: since) else { throw Shell.Failure(description: "unreadable token \(since)") }
        let user = try database.lines("SELECT id FROM users WHERE username = '\(Self.syncer)'").first ?? ""
        let sql = """
            SELECT s.epoch, c.kind, c.object_id, c.xid::text, c.id
            FROM (SELECT bookworm_sync_epoch() AS epoch, bookworm_sync_horizon() AS horizon FROM sync_state) s
            LEFT JOIN LATERAL (
                SELECT kind, object_id, xid, id FROM sync_changes
                WHERE user_id = $1 AND (xid, id) > ($2::xid8, $3) AND xid < s.horizon ORDER BY xid, id LIMIT 101
            ) c ON true
            """
        var result = Delta()
        let clock = ContinuousClock()
        for _ in 0..<runs {
            var rows = 0
            result.timings.append(try await clock.measure {
                let binds = SQLStatement.bindings([.uuid(UUID(uuidString: user) ?? UUID()), .text(String(token.xid)), .int(Int(token.id))])
                for try await row in try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds)) where try row.decode((String, String?).self).1 != nil {
                    rows += 1
                }
            }.milliseconds)
            result.rows = rows
        }
        return result
    }
}
