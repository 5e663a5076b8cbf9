import Foundation

/// HTTP throughput under wrk beside pgbench's on the same statement and concurrency, in
/// alternating rounds. This machine's speed drifts by a third within minutes (pgbench alone
/// ran the nearby statement at 2,070–4,040 tx/s in one quarter of an hour), so a ratio of two
/// separate medians moved between 0.57 and 0.80 across runs of the same build. Each round
/// measures both sides back to back and keeps their ratio; the figure is the median of those
/// ratios, and the order within a round alternates (HTTP first, then pgbench first), so a
/// steady speed-up or slow-down favours neither side.
struct PairedThroughput {
    static let rounds = 6
    static let warmUpSeconds = 2

    var http: [WrkResult] = []
    var prepared: [(tps: Double, p99: Double)] = []
    var simple: [Double] = []
    /// Each HTTP run's and each pgbench prepared run's CPU per request (`CPUSample`), when counted.
    var httpCPU: [CPUShare] = []
    var preparedCPU: [CPUShare] = []

    /// `rounds` rounds (even, so each side goes first equally often); pgbench's simple protocol,
    /// printed for comparison only, runs in every other round. With `cpu`, each wrk and pgbench
    /// prepared run of `slice` seconds is counted (`CPUSample`).
    static func measure(rounds: Int, slice: Int, cpu: (() -> CPUSample)? = nil, wrk: () throws -> WrkResult,
                        prepared: () throws -> (tps: Double, p99: Double), simple: () throws -> Double) throws -> PairedThroughput {
        var result = PairedThroughput()
        func runHTTP() throws {
            let before = cpu?()
            let run = try wrk()
            result.http.append(run)
            if let before, let after = cpu?() { result.httpCPU.append(after.perRequest(since: before, requests: Double(run.requests))) }
        }
        func runPrepared() throws {
            let before = cpu?()
            let run = try prepared()
            result.prepared.append(run)
            if let before, let after = cpu?() {
                result.preparedCPU.append(after.perRequest(since: before, requests: run.tps * Double(slice)))
            }
        }
        for round in 0..<rounds {
            if round % 2 == 0 {
                try runHTTP()
                try runPrepared()
                result.simple.append(try simple())
            } else {
                try runPrepared()
                try runHTTP()
            }
        }
        return result
    }

    /// wrk at `target` (its URL, after any options such as a script) beside pgbench running
    /// `scripts` on `database`, `clients` each, a third of `seconds` (at least 2) a side a round.
    /// Both run unmeasured for `warmUpSeconds` first: the server has had no HTTP request yet, so
    /// its first round would otherwise include opening its pools' connections, preparing the
    /// statement on each and filling its session cache, none of which a running server pays
    /// again. pgbench starts its connections anew in every run, so warming it carries over only
    /// what the two share (PostgreSQL's buffers); it runs for symmetry.
    static func measure(_ tools: LoadTools, server: ServerUnderTest, database: BenchDatabase, target: [String], scripts: [String],
                        clients: Int, seconds: Int) throws -> PairedThroughput {
        let slice = max(seconds / 3, 2)
        let postmaster = try server.postmasterPID(), serverPID = server.process.processIdentifier
        _ = try Shell.run(tools.wrk, ["-t2", "-c\(clients)", "-d\(warmUpSeconds)s"] + target)
        _ = try database.pgbench(tools.pgbench, scripts: scripts, clients: clients, seconds: warmUpSeconds, mode: "prepared")
        return try measure(
            rounds: rounds, slice: slice, cpu: { CPUSample.take(server: serverPID, postmaster: postmaster) },
            wrk: { WrkResult.parse(try Shell.run(tools.wrk, ["-t2", "-c\(clients)", "-d\(slice)s", "--latency"] + target)) },
            prepared: { try database.pgbenchWithP99(tools.pgbench, scripts: scripts, clients: clients, seconds: slice, mode: "prepared") },
            simple: { try database.pgbench(tools.pgbench, scripts: scripts, clients: clients, seconds: slice, mode: "simple") })
    }

    /// The same on split CPUs (`CoreSplit`): PostgreSQL on one half, the server and both load
    /// tools on the other, four rounds, pgbench prepared only; nil on a machine of one CPU.
    /// pgbench runs at its best number of clients up to `clients` (2, 4, 8 or 16, probed first):
    /// on one core, 16 backends at once ran the nearby statement at 1,240–1,270 tx/s, where 2
    /// ran it at 1,860–1,910, and the server's pool, not wrk's 16 connections, decides how many
    /// statements PostgreSQL runs at once, so pgbench at 16 would flatter the server.
    static func measureSplit(_ tools: LoadTools, server: ServerUnderTest, database: BenchDatabase, target: [String],
                             scripts: [String], clients: Int, seconds: Int) throws -> SplitThroughput? {
        guard let split = CoreSplit.ofThisMachine() else { return nil }
        let slice = max(seconds / 3, 2)
        return try split.whileSplit(postmaster: try server.postmasterPID(), server: server.process.processIdentifier) { () -> SplitThroughput in
            let counts = [2, 4, 8, 16].filter { $0 <= clients }
            let probes = try counts.map { try database.pgbench(tools.pgbench, scripts: scripts, clients: $0, seconds: 2, mode: "prepared") }
            let best = zip(counts, probes).max { $0.1 < $1.1 }?.0 ?? clients
            let result = try measure(
                rounds: 4, slice: slice,
                wrk: { WrkResult.parse(try Shell.run(tools.wrk, ["-t2", "-c\(clients)", "-d\(slice)s", "--latency"] + target)) },
                prepared: { try database.pgbenchWithP99(tools.pgbench, scripts: scripts, clients: best, seconds: slice, mode: "prepared") },
                simple: { 0 })
            return SplitThroughput(throughput: result, split: split, pgbenchClients: best)
        }
    }

    /// Each round's HTTP rate ÷ pgbench prepared's, the two measured back to back.
    var ratios: [Double] { zip(http, prepared).map { $0.successfulPerSecond / max($1.tps, 0.001) } }
    /// The headline: the median of the rounds' ratios.
    var ratio: Double { Self.median(ratios) }
    var httpRate: Double { Self.median(http.map(\.successfulPerSecond)) }
    var preparedRate: Double { Self.median(prepared.map(\.tps)) }
    var simpleRate: Double { Self.median(simple) }
    var httpP99: Double { Self.median(http.map(\.p99Millis)) }
    var preparedP99: Double { Self.median(prepared.map(\.p99)) }
    /// The round at the median HTTP rate (the upper middle one of an even count), for its
    /// latencies and answer counts.
    var medianRun: WrkResult { http.sorted { $0.successfulPerSecond < $1.successfulPerSecond }[http.count / 2] }
    /// The rounds' ratios in the order they ran (HTTP went first in the first, third and fifth),
    /// with each round's two rates, for the reader to see their spread and any drift.
    var spread: String { ratios.map { String(format: "%.2f", $0) }.joined(separator: " ") }
    func printRounds(_ label: String) {
        let rounds = zip(http, prepared).map { String(format: "%.0f/%.0f", $0.successfulPerSecond, $1.tps) }
        print("\(label), each round's HTTP req/s / pgbench prepared tx/s in order (HTTP first in rounds 1, 3, 5): "
              + rounds.joined(separator: " "))
    }

    /// Where a request's CPU went, medians of the rounds (ms): the server, PostgreSQL beside it
    /// and wrk; PostgreSQL and pgbench on pgbench's side. Nil when not counted.
    var cpu: (http: CPUShare, pgbench: CPUShare)? {
        guard !httpCPU.isEmpty, !preparedCPU.isEmpty else { return nil }
        func median(_ shares: [CPUShare]) -> CPUShare {
            CPUShare(server: Self.median(shares.map(\.server)), database: Self.median(shares.map(\.database)),
                     tools: Self.median(shares.map(\.tools)))
        }
        return (median(httpCPU), median(preparedCPU))
    }

    /// The table's row of `cpu`, under the throughput it explains.
    var cpuRow: [String]? {
        cpu.map { http, pgbench in
            ["    CPU per request (ms): server / PostgreSQL / wrk", String(format: "%.3f / %.3f / %.3f", http.server, http.database, http.tools),
             String(format: "PostgreSQL %.3f / pgbench %.3f", pgbench.database, pgbench.tools),
             String(format: "PostgreSQL %+.0f %% beside the server", (http.database / max(pgbench.database, 0.000_001) - 1) * 100),
             String(format: "server ÷ PostgreSQL %.2f", http.server / max(http.database, 0.000_001))]
        }
    }

    /// `cpu` as result rows (figures for context, no goal): the server's CPU per request, and
    /// PostgreSQL's beside it against its own under pgbench.
    /// And the server's CPU per request ÷ PostgreSQL's beside it, which swings far less with the
    /// machine's speed than a throughput ratio; `serverShareGoal` is its ceiling, if it has one.
    func cpuResults(_ measure: String, serverShareGoal: Double? = nil) -> [ResultRow] {
        guard let (http, pgbench) = cpu else { return [] }
        let share = http.server / max(http.database, 0.000_001)
        return [
            ResultRow("\(measure): the server's CPU ÷ PostgreSQL's per request", share, "x",
                      reference: String(format: "server %.3f ms, PostgreSQL %.3f ms", http.server, http.database),
                      goal: serverShareGoal.map { String(format: "<= %.2f", $0) }, met: serverShareGoal.map { share <= $0 }),
            ResultRow("\(measure): the server's CPU per request", http.server, "ms",
                      reference: String(format: "wrk %.3f ms per request", http.tools)),
            ResultRow("\(measure): PostgreSQL's CPU per request", http.database, "ms",
                      reference: String(format: "PostgreSQL %.3f ms per pgbench prepared transaction", pgbench.database),
                      ratio: http.database / max(pgbench.database, 0.000_001)),
        ]
    }

    /// The middle value, or the mean of the two middle ones for an even count (six rounds: the
    /// upper of the two would lean the headline up).
    static func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted(), middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }
}

/// The HTTP-versus-pgbench figure on split CPUs, printed under the shared one it explains; the
/// goal stays with the shared figure, so this row has none.
struct SplitThroughput {
    let throughput: PairedThroughput
    let split: CoreSplit
    /// pgbench's best number of clients on split CPUs (see `measureSplit`).
    let pgbenchClients: Int

    var tableRow: [String] {
        ["    the same on split CPUs: \(split.description)", String(format: "%.0f req/s", throughput.httpRate),
         String(format: "%.0f tx/s pgbench prepared, %d clients", throughput.preparedRate, pgbenchClients),
         String(format: "%.2f x (rounds %@)", throughput.ratio, throughput.spread), "-"]
    }

    func result(_ measure: String) -> ResultRow {
        ResultRow("\(measure) on split CPUs (\(split.description))", throughput.httpRate, "req/s",
                  reference: String(format: "pgbench prepared %.0f tx/s at its best, %d clients", throughput.preparedRate, pgbenchClients),
                  ratio: throughput.ratio)
    }
}
