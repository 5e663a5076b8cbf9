
import Catalog
import Foundation

/// `BookwormBench catalog`: on a seeded library (default 1,000,000 copies / 200,000 books /
/// 100,000 users), (a) page 1 vs page 1,000 latency by cursor, (b) `q` search throughput over
/// HTTP at 16 clients vs pgbench running the same SQL at the same concurrency, (c) each kind of
/// query word on the server's path against the planned statement (`SearchWords`).
struct CatalogBenchmark {
    let users: Int
    let books: Int
    let copies: Int
    let seconds: Int
    let clients: Int
    let port: Int
    let query = "shadow garc"

    func run() async throws {
        let tools = try LoadTools.find()
        let (wrk, curl) = (tools.wrk, tools.curl)
        let server = try ServerUnderTest.start(port: port)
        defer { server.stop() }
        let database = server.database(psql: tools.psql)
        let existing = try database.scalar("SELECT count(*) FROM copies")
        if existing < copies {
            print("seeding \(users) users, \(books) books, \(copies - existing) copies…")
            try Shell.runStreaming(try ServerUnderTest.releaseBinary(),
                                   ["seed", "--users", "\(users)", "--books", "\(books)", "--copies", "\(copies - existing)"],
                                   environment: server.environment)
        }
        try SearchWords.addRareCopies(database)
        print("library: \(try database.scalar("SELECT count(*) FROM copies WHERE status = 'available'")) available copies")
        let base = "http://127.0.0.1:\(port)"

        let cursor = try Pages.walk(curl: curl, url: base + "/v1/copies?limit=20", pages: 999)
        let page1 = WrkResult.parse(try Shell.run(wrk, ["-t1", "-c1", "-d\(seconds)s", "--latency", base + "/v1/copies?limit=20"]))
        let page1000 = WrkResult.parse(try Shell.run(wrk, ["-t1", "-c1", "-d\(seconds)s", "--latency",
                                                           base + "/v1/copies?limit=20&cursor=\(cursor)"]))

        let encoded = query.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? query
        let script = BenchScratch.url("bookworm-library-\(getpid()).sql").path
        let (search, words) = try await server.withClients { _, asServer in
            (try await CatalogBenchmarkSQL.librarySearch(query: query, limit: 20, database: asServer),
             try await SearchWords.measure(database: asServer))
        }
        print("library search \"\(query)\": the server's statement is \(search.shape.rawValue)")
        try (search.sql + ";\n").write(toFile: script, atomically: true, encoding: .utf8)
        // The issue's reference is pgbench prepared (a skilled user prepares); the default simple
        // protocol, which parses and plans every run, is printed beside it. In alternating
        // rounds (`PairedThroughput`).
        let target = [base + "/v1/copies?limit=20&q=\(encoded)"]
        let throughput = try PairedThroughput.measure(tools, server: server, database: database, target: target, scripts: [script], clients: clients,
                                                      seconds: seconds)
        let split = try PairedThroughput.measureSplit(tools, server: server, database: database, target: target, scripts: [script],
                                                      clients: clients, seconds: seconds)
        let http = throughput.medianRun, pg = throughput.preparedRate, pgP99 = throughput.preparedP99, simple = throughput.simpleRate

        let ratio = page1000.p50Millis / max(page1.p50Millis, 0.001)
        let share = throughput.ratio
        print("")
        print(Table(rows: [
            ["measure", "value", "reference", "target", "met"],
            ["(a) library page 1 p50", String(format: "%.2f ms", page1.p50Millis), "-", "-", "-"],
            ["(a) library page 1000 p50 (cursor)", String(format: "%.2f ms", page1000.p50Millis),
             String(format: "%.2f ms page 1", page1.p50Millis), String(format: "ratio <= 1.3: %.2f", ratio), ratio <= 1.3 ? "yes" : "NO"],
            ["(b) q=\"\(query)\" over HTTP, \(clients) clients", String(format: "%.0f req/s", throughput.httpRate),
             String(format: "%.0f tx/s pgbench -M prepared", pg), String(format: ">= 0.8 x: %.2f x", share), share >= 0.8 ? "yes" : "NO"],
            ["    each round's ratio (\(throughput.ratios.count) rounds, median above)", throughput.spread, "-", "-", "-"],
            ["    the same beside pgbench simple", String(format: "%.0f req/s", throughput.httpRate),
             String(format: "%.0f tx/s pgbench simple", simple), String(format: "%.2f x", throughput.httpRate / max(simple, 0.001)), "-"],
            ["    HTTP p50 / p99", String(format: "%.2f / %.2f ms", http.p50Millis, throughput.httpP99), "-", "-", "-"],
            TailLatency.row("    p99 at \(clients) clients", http: throughput.httpP99, pgbench: pgP99),
            ["    non-2xx answers", "\(http.non2xx) of \(http.requests)", "-", "-", "-"],
        ] + (throughput.cpuRow.map { [$0] } ?? []) + (split.map { [$0.tableRow] } ?? [])).render())
        throughput.printRounds("library search")
        print("")
        print(SearchWords.table(words))
        BenchResults.save("catalog", [
            ResultRow("library page 1000 ÷ page 1 (HTTP p50)", ratio, "x", reference: String(format: "page 1 %.2f ms", page1.p50Millis),
                      ratio: ratio, goal: "<= 1.3 x", met: ratio <= 1.3),
            ResultRow("HTTP library search, \(clients) clients", throughput.httpRate, "req/s",
                      reference: String(format: "pgbench -M prepared %.0f tx/s", pg), ratio: share, goal: ">= 0.8 x", met: share >= 0.8),
            TailLatency.result("HTTP library search p99, \(clients) clients", http: throughput.httpP99, pgbench: pgP99),
        ] + throughput.cpuResults("HTTP library search, \(clients) clients", serverShareGoal: 0.5) + (split.map { [$0.result("HTTP library search, \(clients) clients")] } ?? []) + SearchWords.results(words))
    }
}

/// psql and pgbench against the server-under-test's embedded cluster (through its socket).
struct BenchDatabase {
    let psql: String
    let socketDirectory: String

    func scalar(_ sql: String) throws -> Int {
        let text = try Shell.run(psql, ["-h", socketDirectory, "-U", "bookworm", "-d", "bookworm", "-tAc", sql])
        return Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    /// One value per row of the first column.
    func lines(_ sql: String) throws -> [String] {
        let text = try Shell.run(psql, ["-h", socketDirectory, "-U", "bookworm", "-d", "bookworm", "-tAc", sql])
        return text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    func execute(_ sql: String) throws {
        try Shell.run(psql, ["-h", socketDirectory, "-U", "bookworm", "-d", "bookworm", "-q", "-c", sql])
    }

    /// A benchmark's own users go once it has measured, with what they made: kept, their copies
    /// piled up run after run in the bench cluster, newest of all, and every later library search
    /// read past them (the import storm's reached 2.5 million copies after 25 runs; the
    /// idempotency benchmark's 225,000 in a day took library search from 388 to 53 requests a
    /// second). A failure costs a warning, not the figures just measured.
    func dropBenchUsers(like pattern: String) {
        do {
            try execute("SET statement_timeout = 0; DELETE FROM users WHERE username LIKE '\(pattern)'")
        } catch {
            print("warning: the users \(pattern) were not deleted: \(error)")
        }
    }

    /// Transactions per second pgbench reaches running `script` on `clients` connections.
    /// `mode` is pgbench's query protocol: `prepared` when the server prepares the statement too.
    /// With several scripts, each transaction runs one of them at random.
    func pgbench(_ pgbench: String, script: String, clients: Int, seconds: Int, mode: String = "simple") throws -> Double {
        try self.pgbench(pgbench, scripts: [script], clients: clients, seconds: seconds, mode: mode)
    }

    /// Each transaction's latency in milliseconds: one client, `-M prepared`, `transactions` runs
    /// of `script` with pgbench variables `definitions` (`-D name=value` pairs), after `warmUp`
    /// runs left out (a new connection's first run prepares and plans the statement).
    func pgbenchLatencies(_ pgbench: String, script: String, definitions: [String], transactions: Int, warmUp: Int = 0) throws -> [Double] {
        let folder = BenchScratch.url("bookworm-pgbench-\(getpid())-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("script.sql").path
        try script.write(toFile: file, atomically: true, encoding: .utf8)
        _ = try Shell.run(pgbench, ["-h", socketDirectory, "-U", "bookworm", "-n", "-M", "prepared", "-c", "1", "-t", "\(transactions + warmUp)",
                                    "-l", "--log-prefix", folder.appendingPathComponent("log").path] + definitions + ["-f", file, "bookworm"])
        return try Self.loggedLatencies(in: folder, after: warmUp)
    }

    func pgbench(_ pgbench: String, scripts: [String], clients: Int, seconds: Int, mode: String = "simple") throws -> Double {
        let text = try Shell.run(pgbench, ["-h", socketDirectory, "-U", "bookworm", "-n", "-M", mode, "-c", "\(clients)", "-j", "2",
                                           "-T", "\(seconds)"] + scripts.flatMap { ["-f", $0] } + ["bookworm"])
        return try Self.tps(in: text)
    }
}
