import Foundation

/// `BookwormBench trades`, on the catalog benchmark's data (1,000,000 copies): (a) `GET /v1/me/trades`
/// page 1 vs page 1,000 for a user with 100,000 trades; (b) 32 clients requesting the same 100
/// copies, then the owner accepting them all at once from 32 connections (every copy's requests
/// race), p50/p99 of each; (c) the request's HTTP throughput vs pgbench running its statements.
struct TradesBenchmark {
    let trades: Int
    let clients: Int
    let copies: Int
    let seconds: Int
    let port: Int
    let limit = 20
    static let lister = "bench_trader", lender = "bench_lender", borrower = "bench_borrower_"

    func run() async throws {
        let tools = try LoadTools.find()
        let server = try ServerUnderTest.start(port: port)
        defer { server.stop() }
        let database = server.database(psql: tools.psql)
        guard try database.scalar("SELECT count(*) FROM copies") >= trades else {
            throw Shell.Failure(description: "seed first: `BookwormBench catalog` seeds 1,000,000 copies")
        }
        let base = "http://127.0.0.1:\(port)"
        let listerToken = try BenchAccount.token(curl: tools.curl, base: base, username: Self.lister)
        try database.execute(TradesBenchmarkSQL.seedIncoming(username: Self.lister, count: trades))
        let held = try database.scalar("SELECT count(*) FROM trades WHERE owner_id = (SELECT id FROM users WHERE username = '\(Self.lister)')")
        print("trades: \(Self.lister) has \(held) incoming trades")
        let url = base + "/v1/me/trades?limit=\(limit)"
        let cursor = try Pages.walk(curl: tools.curl, url: url, pages: 999, token: listerToken)
        let script = try BenchAccount.headerScript(token: listerToken)
        let page1 = WrkResult.parse(try Shell.run(tools.wrk, ["-t1", "-c1", "-d\(seconds)s", "--latency", "-s", script, url]))
        let page1000 = WrkResult.parse(try Shell.run(tools.wrk, ["-t1", "-c1", "-d\(seconds)s", "--latency", "-s", script, url + "&cursor=\(cursor)"]))

        let lenderToken = try BenchAccount.token(curl: tools.curl, base: base, username: Self.lender)
        var borrowers: [String] = []
        for index in 0..<clients { borrowers.append(try BenchAccount.token(curl: tools.curl, base: base, username: "\(Self.borrower)\(index)")) }
        let pgbenchScript = BenchScratch.url("bookworm-trades-\(getpid()).sql").path
        try TradesBenchmarkSQL.requestScript(copies: copies, requesters: clients).write(toFile: pgbenchScript, atomically: true, encoding: .utf8)
        // pgbench first, on copies of its own; then the same copies afresh for HTTP.
        try database.execute(TradesBenchmarkSQL.resetContention(lender: Self.lender, borrowerPrefix: Self.borrower, copies: copies))
        let pgbenchTPS = try database.pgbench(tools.pgbench, script: pgbenchScript, clients: clients, seconds: seconds)
        try database.execute(TradesBenchmarkSQL.resetContention(lender: Self.lender, borrowerPrefix: Self.borrower, copies: copies))
        let copyIDs = try database.lines("SELECT copy_id FROM bench_trade_targets ORDER BY n")
        let (requests, requestSeconds) = try requestPhase(borrowers: borrowers, copies: copyIDs)
        let (accepts, acceptSeconds) = try acceptPhase(lender: lenderToken, copies: copyIDs, database: database)
        let accepted = try database.scalar("""
            SELECT count(*) FROM trades WHERE state = 'accepted' AND owner_id = (SELECT id FROM users WHERE username = '\(Self.lender)')
            """)
        let reserved = try database.scalar("SELECT count(DISTINCT copy_id) FROM copy_reservations")
        report(page1: page1, page1000: page1000, requests: requests, requestSeconds: requestSeconds, accepts: accepts,
               acceptSeconds: acceptSeconds, accepted: accepted, reserved: reserved, pgbenchTPS: pgbenchTPS)
    }

    /// Every client asks for every copy, each in its own shuffled order.
    private func requestPhase(borrowers: [String], copies: [String]) throws -> (Samples, Double) {
        let samples = Samples(), port = self.port
        let started = ContinuousClock.now
        onThreads(borrowers.count) { index in
            guard let connection = try? BenchHTTPConnection(port: port) else { return }
            for copy in copies.shuffled() {
                let begun = ContinuousClock.now
                let status = (try? connection.send("POST", "/v1/trades", token: borrowers[index],
                                                   json: "{\"copy_id\":\"\(copy)\",\"kind\":\"gift\"}").status) ?? 0
                samples.add(millis: (ContinuousClock.now - begun).milliseconds, status: status)
            }
        }
        return (samples, (ContinuousClock.now - started).milliseconds / 1000)
    }

    /// Connection i accepts borrower i's request for every copy, all in the same copy order, so
    /// each copy's 32 requests race: one accept wins, the others meet a 409.
    private func acceptPhase(lender: String, copies: [String], database: BenchDatabase) throws -> (Samples, Double) {
        let rows = try database.lines("""
            SELECT r.n || ' ' || g.n || ' ' || t.id FROM trades t JOIN bench_trade_requesters r ON r.user_id = t.requester_id
            JOIN bench_trade_targets g ON g.copy_id = t.copy_id WHERE t.state = 'requested'
            """)
        var byClient: [Int: [(Int, String)]] = [:]
        for row in rows {
            let parts = row.split(separator: " ")
            guard parts.count == 3, let client = Int(parts[0]), let copy = Int(parts[1]) else { continue }
            byClient[client - 1, default: []].append((copy, String(parts[2])))
        }
        let plans = (0..<clients).map { (byClient[$0] ?? []).sorted { $0.0 < $1.0 }.map(\.1) }
        let samples = Samples(), port = self.port
        let started = ContinuousClock.now
        onThreads(clients) { index in
            guard let connection = try? BenchHTTPConnection(port: port) else { return }
            for trade in plans[index] {
                let begun = ContinuousClock.now
                let status = (try? connection.send("POST", "/v1/trades/\(trade)/accept", token: lender).status) ?? 0
                samples.add(millis: (ContinuousClock.now - begun).milliseconds, status: status)
            }
        }
        return (samples, (ContinuousClock.now - started).milliseconds / 1000)
    }

    private func report(page1: WrkResult, page1000: WrkResult, requests: Samples, requestSeconds: Double, accepts: Samples,
                        acceptSeconds: Double, accepted: Int, reserved: Int, pgbenchTPS: Double) {
        let ratio = page1000.p50Millis / max(page1.p50Millis, 0.001)
        let (requestTimes, requestStatuses) = requests.all
        let (acceptTimes, acceptStatuses) = accepts.all
        let request = Percentiles(requestTimes), accept = Percentiles(acceptTimes)
        let requestRate = Double(requestTimes.count) / max(requestSeconds, 0.001)
        let acceptRate = Double(acceptTimes.count) / max(acceptSeconds, 0.001)
        print("")
        print(Table(rows: [
            ["measure", "p50", "p99", "reference / target", "met"],
            ["(a) HTTP my trades page 1 (\(trades) trades)", ms(page1.p50Millis), ms(page1.p99Millis), "-", "-"],
            ["(a) HTTP my trades page 1000 (cursor)", ms(page1000.p50Millis), ms(page1000.p99Millis),
             String(format: "ratio <= 1.3: %.2f", ratio), ratio <= 1.3 ? "yes" : "NO"],
            ["(b) request, \(clients) clients x \(copies) copies", ms(request.p50), ms(request.p99), statuses(requestStatuses), "-"],
            ["(b) accept, \(clients) racing per copy", ms(accept.p50), ms(accept.p99), statuses(acceptStatuses),
             accepted == copies && reserved == copies ? "yes: \(accepted) accepted, one per copy" : "NO: \(accepted) accepted, \(reserved) reserved"],
            ["(c) request throughput over HTTP", String(format: "%.0f req/s", requestRate), "-",
             String(format: "pgbench same statements: %.0f tx/s (%.0f%%)", pgbenchTPS, requestRate / max(pgbenchTPS, 0.001) * 100), "-"],
            ["    accept throughput over HTTP", String(format: "%.0f req/s", acceptRate), "-", "-", "-"],
        ]).render())
        let share = requestRate / max(pgbenchTPS, 0.001)
        BenchResults.save("trades", [
            ResultRow("my trades page 1000 ÷ page 1 (HTTP p50)", ratio, "x", reference: String(format: "page 1 %.2f ms", page1.p50Millis),
                      ratio: ratio, goal: "<= 1.3 x", met: ratio <= 1.3),
            ResultRow("racing accepts: one winner per copy", Double(accepted), "accepted", reference: "\(copies) copies",
                      goal: "one per copy", met: accepted == copies && reserved == copies),
            ResultRow("trade requests over HTTP, \(clients) clients", requestRate, "req/s",
                      reference: String(format: "pgbench %.0f tx/s", pgbenchTPS), ratio: share),
        ])
    }

    private func statuses(_ counts: [Int: Int]) -> String {
        counts.sorted { $0.key < $1.key }.map { "\($0.value)x\($0.key)" }.joined(separator: " ")
    }

    private func ms(_ value: Double) -> String { String(format: "%.2f ms", value) }
}
