import Foundation

/// `BookwormBench idempotency`: `POST /v1/me/copies` from 16 clients (one account each, a
/// keep-alive connection each) with a fresh `Idempotency-Key` per request, against the same
/// requests without one, in alternating rounds; then every client sends its keyed requests again
/// and each replay's latency is set against its original's (median against median).
struct IdempotencyBenchmark {
    let seconds: Int
    let clients: Int
    let rounds: Int
    let port: Int

    static let invocation = UUID().uuidString
    static let body = Array(#"{"title":"The Dispossessed","authors":["Ursula K. Le Guin"],"condition":"good"}"#.utf8)

    func run() async throws {
        let tools = try LoadTools.find()
        let server = try ServerUnderTest.start(port: port)
        defer { server.stop() }
        let base = "http://127.0.0.1:\(port)"
        let tokens = try (0..<clients).map { try BenchAccount.token(curl: tools.curl, base: base, username: "bench_retrier\($0)") }
        var plain: [Double] = [], keyed: [Double] = []
        var plainCPU: [CPUShare] = [], keyedCPU: [CPUShare] = []
        let postmaster = try server.postmasterPID(), serverPID = server.process.processIdentifier
        let originals = Samples()
        var sent: [[String]] = Array(repeating: [], count: clients)
        _ = phase(tokens: tokens, keys: false, run: "warm-up", into: Samples(), sent: &sent)
        sent = Array(repeating: [], count: clients)
        for round in 0..<rounds {
            for keys in [false, true] {
                let before = CPUSample.take(server: serverPID, postmaster: postmaster)
                let rate = phase(tokens: tokens, keys: keys, run: "\(keys ? "keyed" : "plain")\(round)", into: keys ? originals : Samples(),
                                 sent: &sent)
                let share = CPUSample.take(server: serverPID, postmaster: postmaster)
                    .perRequest(since: before, requests: rate * Double(seconds))
                if keys { keyed.append(rate); keyedCPU.append(share) } else { plain.append(rate); plainCPU.append(share) }
            }
            print(String(format: "  round %d: %.0f without a key, %.0f with one (requests/s); CPU ms per request, server / PostgreSQL: "
                         + "%.3f / %.3f without, %.3f / %.3f with", round + 1, plain[round], keyed[round], plainCPU[round].server,
                         plainCPU[round].database, keyedCPU[round].server, keyedCPU[round].database))
        }
        let replays = Samples(), wrong = LockedCounter()
        let port = self.port, keys = sent
        onThreads(clients) { client in
            guard let connection = try? BenchHTTPConnection(port: port) else { return wrong.add() }
            for key in keys[client] {
                let begun = ContinuousClock.now
                let answer = try? connection.send("POST", "/v1/me/copies", token: tokens[client], body: Self.body,
                                                  contentType: "application/json", headers: [("Idempotency-Key", key)])
                replays.add(millis: (ContinuousClock.now - begun).milliseconds, status: answer?.status ?? 0)
                if answer?.status != 201 { wrong.add() }
            }
        }
        report(plain: plain.reduce(0, +) / Double(rounds), keyed: keyed.reduce(0, +) / Double(rounds),
               originals: Percentiles(originals.all.latencies), replays: Percentiles(replays.all.latencies), wrong: wrong.value)
        server.database(psql: tools.psql).dropBenchUsers(like: "bench\\_retrier%")
    }

    /// One timed phase from every client at once; requests per second. Keyed requests add their
    /// keys to `sent`, per client.
    func phase(tokens: [String], keys: Bool, run: String, into samples: Samples, sent: inout [[String]]) -> Double {
        let until = ContinuousClock.now + .seconds(seconds)
        let port = self.port
        let used = (0..<tokens.count).map { _ in LockedList() }
        let created = LockedCounter()
        let begun = ContinuousClock.now
        onThreads(tokens.count) { client in
            guard let connection = try? BenchHTTPConnection(port: port) else { return }
            var index = 0
            while ContinuousClock.now < until {
                // Unique to this invocation: the bench cluster and its users outlive a run, and a key
                // of an earlier run's would be answered by replay.
                let key = "\(Self.invocation)-\(run)-\(client)-\(index)"
                index += 1
                let started = ContinuousClock.now
                let answer = try? connection.send("POST", "/v1/me/copies", token: tokens[client], body: Self.body,
                                                  contentType: "application/json", headers: keys ? [("Idempotency-Key", key)] : [])
                samples.add(millis: (ContinuousClock.now - started).milliseconds, status: answer?.status ?? 0)
                if answer?.status == 201 { created.add() }
                if keys, answer?.status == 201 { used[client].append(key) }
            }
        }
        let elapsed = (ContinuousClock.now - begun).milliseconds / 1000
        for client in 0..<tokens.count { sent[client] += used[client].items }
        let statuses = samples.all.statuses
        if statuses.keys.contains(where: { $0 != 201 }) { print("  \(run): statuses so far \(statuses)") }
        return Double(created.value) / elapsed
    }

    func report(plain: Double, keyed: Double, originals: Percentiles, replays: Percentiles, wrong: Int) {
        let ratio = keyed / plain, replayRatio = replays.p50 / originals.p50
        print("""

            idempotency: POST /v1/me/copies, \(clients) clients, \(rounds) rounds of \(seconds) s each way
              with Idempotency-Key     \(String(format: "%.0f", keyed)) requests/s
              without                  \(String(format: "%.0f", plain)) requests/s
              ratio                    \(String(format: "%.2f", ratio)) × (goal ≥ 0.9) \(ratio >= 0.9 ? "met" : "NOT met")
              replay p50               \(String(format: "%.2f", replays.p50)) ms against the original's \(String(format: "%.2f", originals.p50)) ms \
            (\(String(format: "%.2f", replayRatio)) ×, goal ≤ 1)\(wrong > 0 ? "; \(wrong) replays not 201" : "")
            """)
        BenchResults.save("idempotency", [
            ResultRow("POST /v1/me/copies with Idempotency-Key (\(clients) clients)", keyed, "requests/s",
                      reference: "without a key \(String(format: "%.0f", plain)) requests/s", ratio: ratio, goal: ">= 0.9 x", met: ratio >= 0.9),
            ResultRow("replay p50", replays.p50, "ms", reference: "original p50 \(String(format: "%.2f", originals.p50)) ms",
                      ratio: replayRatio, goal: "<= 1 x", met: replayRatio <= 1 && wrong == 0),
        ])
    }
}

/// Strings appended by one thread, read after it is done.
final class LockedList: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [String] = []
    var items: [String] { lock.withLock { list } }
    func append(_ item: String) { lock.withLock { list.append(item) } }
}
