import Foundation
import Logging
import PostgresNIO
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `BookwormBench events`: live streams on two release `bookworm serve` processes sharing the
/// bench cluster. (1) 10,000 idle `GET /v1/me/events` streams on one process: the RSS each adds
/// and the CPU they cost while idle. (2) 1,000 streams of 200 users over both processes, a
/// write of all 200 users' pins committed by a client of its own: the time from just before
/// the commit to each stream's `sync` event. (3) 1,000 live nearby feeds over both processes,
/// a post written through the API: the time from sending it to each feed's `post` event.
/// Beside (1), on the other process: half as many idle keep-alive connections, the RSS each adds.
struct EventsBenchmark {
    let idleStreams: Int
    let rounds: Int
    let port: Int

    /// Users whose five streams each the latency phases hold (200: 1,000 streams).
    var users = 200
    static let logger = Logger(label: "bench")

    func run() async throws {
        // Idle keep-alive connections stay open past the default 30 s while they are counted.
        for (name, value) in ["BOOKWORM_MAX_STREAMS": "\(idleStreams + 2000)", "BOOKWORM_MAX_CONNECTIONS": "\(idleStreams + 4000)",
                              "BOOKWORM_IDLE_TIMEOUT_SECONDS": "600", "BOOKWORM_ARGON2_MEMORY_KIB": "8", "BOOKWORM_ARGON2_ITERATIONS": "1",
                              "BOOKWORM_POSTS_PER_HOUR": "100000"] {
            setenv(name, value, 1)
        }
        let a = try ServerUnderTest.start(port: port)
        defer { a.stop() }
        let b = try ServerUnderTest.start(port: port + 1)
        defer { b.stop() }
        FileHandle.standardOutput.write(Data("  servers: pid \(a.process.processIdentifier) on \(port), pid \(b.process.processIdentifier) on \(port + 1)\n".utf8))
        let users = try signIn(max(idleStreams / 5, self.users))
        let idle = idleStreams > 0 ? try idlePhase(a, users: users) : Idle(streams: 0, kibPerStream: .nan, cpuPercent: .nan)
        // On the other process, whose heap no stream has used yet.
        let keepAlive = idleStreams >= 2 ? try keepAlivePhase(b, port: port + 1, connections: idleStreams / 2) : (connections: 0, kib: .nan)
        let group = Array(users.prefix(self.users))
        try preparePins(group)
        let pids = [a.process.processIdentifier, b.process.processIdentifier]
        let serverCPU: @Sendable () -> Double = { pids.reduce(0) { $0 + ProcessCPU.seconds($1, reaped: false) } }
        let pokes = try await pokePhase(a, group: group, cpu: serverCPU)
        let posts = try await postPhase(a, group: group, cpu: serverCPU)
        report(idle: idle, keepAlive: keepAlive, pokes: pokes, posts: posts)
    }

    /// Bench accounts `bench_live<i>`, registered once (the cluster outlives a run), signed in now.
    func signIn(_ count: Int) throws -> [String] {
        let connection = try BenchHTTPConnection(port: port)
        return try (0..<count).map { index in
            let name = "bench_live\(index)"
            let register = try connection.send("POST", "/v1/auth/register", token: nil,
                                               json: #"{"email":"\#(name)@example.org","username":"\#(name)","password":"\#(BenchAccount.password)"}"#)
            let answer = register.status == 201 ? register
                : try connection.send("POST", "/v1/auth/login", token: nil, json: #"{"login":"\#(name)","password":"\#(BenchAccount.password)"}"#)
            guard let object = try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any],
                  let token = object["token"] as? String else { throw Shell.Failure(description: "\(name): \(answer.status) \(answer.body)") }
            return token
        }
    }

    struct Idle {
        let streams: Int
        let kibPerStream: Double
        let cpuPercent: Double
    }

    /// Five streams for each user on one process, then half a minute of nothing (a heartbeat falls in it).
    func idlePhase(_ server: ServerUnderTest, users: [String]) throws -> Idle {
        let pid = server.process.processIdentifier
        let before = residentKiB(pid)
        let targets = users.flatMap { token in (0..<5).map { _ in EventsFleet.Target(port: port, path: "/v1/me/events", token: token) } }
        let fleet = try EventsFleet(targets, watch: "sync")
        defer { fleet.close() }
        guard fleet.waitUntilOpen(timeout: 300) else { throw Shell.Failure(description: "not every stream opened") }
        let after = residentKiB(pid)
        FileHandle.standardOutput.write(Data("  idle: \(fleet.count) streams open; measuring 30 s of idle CPU\n".utf8))
        let cpuBefore = ProcessCPU.seconds(pid, reaped: false)
        Thread.sleep(forTimeInterval: 30)
        let cpu = ProcessCPU.seconds(pid, reaped: false) - cpuBefore
        print("  idle: \(fleet.count) streams, RSS \(before) → \(after) KiB, \(String(format: "%.2f", cpu)) s of CPU in 30 s")
        return Idle(streams: fleet.count, kibPerStream: Double(after - before) / Double(fleet.count), cpuPercent: cpu / 30 * 100)
    }

    /// `connections` keep-alive connections, each idle after one `GET /health/live`: the RSS
    /// each adds (what a phone that keeps its connection between requests costs the process).
    func keepAlivePhase(_ server: ServerUnderTest, port: Int, connections: Int) throws -> (connections: Int, kib: Double) {
        let pid = server.process.processIdentifier
        let before = residentKiB(pid)
        var sockets: [Int32] = []
        defer { for fd in sockets { close(fd) } }
        for start in stride(from: 0, to: connections, by: EventsFleet.batch) {
            let batch = try (start..<min(start + EventsFleet.batch, connections)).map { _ in
                try EventsFleet.connect(port: port, sending: "GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            }
            sockets += batch
            try EventsFleet.waitForFirstBytes(batch)
        }
        let after = residentKiB(pid)
        print("  keep-alive: \(connections) idle connections, RSS \(before) → \(after) KiB")
        return (connections, Double(after - before) / Double(connections))
    }

    /// One meetup pin for each user of the group, at one place (made once).
    func preparePins(_ group: [String]) throws {
        let connection = try BenchHTTPConnection(port: port)
        for token in group {
            let pins = try connection.send("GET", "/v1/me/pins", token: token)
            guard !pins.body.contains("\"id\"") else { continue }
            let made = try connection.send("POST", "/v1/me/pins", token: token,
                                           json: #"{"label":"bench","kind":"meetup","latitude":45.07,"longitude":7.68}"#)
            guard made.status == 201 else { throw Shell.Failure(description: "pin: \(made.status) \(made.body)") }
        }
    }

    /// Five streams per user of the group, alternating between the processes; each round one
    /// statement changes every user's pin (200 notifications), timed from just before it.
    func pokePhase(_ server: ServerUnderTest, group: [String], cpu: @escaping @Sendable () -> Double) async throws -> Phase {
        let targets = group.flatMap { token in
            (0..<5).map { index in EventsFleet.Target(port: port + index % 2, path: "/v1/me/events", token: token) }
        }
        let fleet = try EventsFleet(targets, watch: "sync")
        defer { fleet.close() }
        guard fleet.waitUntilOpen(timeout: 60) else { throw Shell.Failure(description: "not every stream opened") }
        let names = (0..<group.count).map { "bench_live\($0)" }
        return try await server.withClients { client, _ in
            var latencies: [EventsFleet.Arrival] = []
            let cpuBefore = cpu()
            for round in 0..<rounds {
                let before = fleet.counts
                let committed = try await Self.committed(client, holding: fleet, """
                    UPDATE pins SET label = \("round \(round)") WHERE owner_id IN (SELECT id FROM users WHERE username = ANY(\(names)))
                    """)
                let arrivals = fleet.arrivals(after: before, since: committed, timeout: 10)
                latencies += arrivals
                if let first = arrivals.map(\.wire).min() { Self.firsts.withLock { $0.append(first) } }
            }
            return Phase(arrivals: latencies, serverCPU: cpu() - cpuBefore)
        }
    }

    /// A latency phase: every stream's arrivals, and the CPU both servers spent in its rounds.
    struct Phase {
        let arrivals: [EventsFleet.Arrival]
        let serverCPU: Double

        /// Microseconds of server CPU per event, the notification and horizon check included.
        var cpuPerEvent: Double { serverCPU / Double(max(arrivals.count, 1)) * 1e6 }
    }

    /// How long the bench leaves a round's sockets unread (`EventsFleet.hold`): a round's whole
    /// fan-out (10-20 ms at p99) with room to spare. Longer only stretches the rounds and the
    /// time a heartbeat may fall in a hold (its events then go unstamped).
    static let hold = Duration.milliseconds(50)

    /// Per poke round, when the first of its streams heard: the floor under the fan-out.
    static let firsts = Mutex<[Double]>([])

    /// Five live feeds per user of the group around the group's place, over both processes;
    /// each round the first user's post is committed there by the bench's own client, timed
    /// from just before its COMMIT.
    func postPhase(_ server: ServerUnderTest, group: [String], cpu: @escaping @Sendable () -> Double) async throws -> Phase {
        let path = "/v1/posts/live?latitude=45.0&longitude=7.6&radius_km=50"
        let targets = group.flatMap { token in (0..<5).map { index in EventsFleet.Target(port: port + index % 2, path: path, token: token) } }
        let fleet = try EventsFleet(targets, watch: "post")
        defer { fleet.close() }
        guard fleet.waitUntilOpen(timeout: 60) else { throw Shell.Failure(description: "not every feed opened") }
        let rounds = rounds
        return try await server.withClients { client, _ in
            var latencies: [EventsFleet.Arrival] = []
            let cpuBefore = cpu()
            for round in 0..<rounds {
                let before = fleet.counts
                let committed = try await Self.committed(client, holding: fleet, """
                    INSERT INTO posts (author_id, kind, body, pin_id)
                    SELECT u.id, 'offer', \("Bench post \(round) \(UUID().uuidString)"), p.id
                    FROM users u JOIN pins p ON p.owner_id = u.id WHERE u.username = 'bench_live0' LIMIT 1
                    """)
                latencies += fleet.arrivals(after: before, since: committed, timeout: 10)
            }
            return Phase(arrivals: latencies, serverCPU: cpu() - cpuBefore)
        }
    }

    /// Runs `write` in a transaction and answers the moment its COMMIT returned: the write is
    /// committed (and its notifications sent) by then. The COMMIT's own round trip, with its WAL
    /// flush, is recorded apart (`commits`). `fleet` holds its reading from just before the COMMIT.
    static func committed(_ client: PostgresClient, holding fleet: EventsFleet, _ write: PostgresQuery) async throws -> EventsFleet.Moment {
        try await client.withConnection { connection in
            try await connection.query("BEGIN", logger: logger)
            try await connection.query(write, logger: logger)
            fleet.hold(for: Self.hold)
            let sent = ContinuousClock.now
            try await connection.query("COMMIT", logger: logger)
            let done = EventsFleet.Moment.now
            commits.withLock { $0.append((done.seen - sent).milliseconds) }
            return done
        }
    }

    static let commits = Mutex<[Double]>([])

    func residentKiB(_ pid: Int32) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    func report(idle: Idle, keepAlive: (connections: Int, kib: Double), pokes pokePhase: Phase, posts postPhase: Phase) {
        let pokes = pokePhase.arrivals, posts = postPhase.arrivals
        // The goals are read on the wire (the kernel's arrival stamps). When the bench read each
        // event is not shown: after the hold (`EventsFleet.hold`) it would only show the hold.
        // Every event must arrive; nine in ten must have a stamp of their own (a heartbeat that
        // falls in a hold takes the stamp of its server's streams' reads).
        let stamped = { (arrivals: [EventsFleet.Arrival]) in arrivals.map(\.wire).filter { !$0.isNaN } }
        let poke = Percentiles(stamped(pokes)), post = Percentiles(stamped(posts)), commit = Percentiles(Self.commits.withLock { $0 })
        let first = Percentiles(Self.firsts.withLock { $0 })
        let expected = rounds * users * 5
        let enough = { (arrivals: [EventsFleet.Arrival]) in arrivals.count == expected && stamped(arrivals).count * 10 >= expected * 9 }
        let pokesOK = enough(pokes), postsOK = enough(posts)
        func verdict(_ met: Bool) -> String { met ? "met" : "NOT met" }
        func ms(_ value: Double) -> String { String(format: "%.2f", value) }
        print("""

            events: live streams, two processes on one database
              idle streams              \(idle.streams) on one process: \(String(format: "%.1f", idle.kibPerStream)) KiB RSS each \
            (goal ≤ 20) \(verdict(idle.kibPerStream <= 20)); idle CPU \(String(format: "%.2f", idle.cpuPercent)) % of a core
              idle keep-alive           \(String(format: "%.1f", keepAlive.kib)) KiB RSS each, after one GET /health/live (the other process)
              commit → sync on the wire p50 \(ms(poke.p50)) ms (goal ≤ 5) \(verdict(poke.p50 <= 5 && pokesOK)), \
            p99 \(ms(poke.p99)) ms (goal ≤ 50) \(verdict(poke.p99 <= 50)); \(pokes.count) of \(expected) events, \(stamped(pokes).count) stamped
                server CPU per event    \(String(format: "%.1f", pokePhase.cpuPerEvent)) µs (both processes, over the rounds)
              first stream of a round   p50 \(ms(first.p50)) ms, p99 \(ms(first.p99)) ms (on the wire)
              COMMIT round trip         p50 \(ms(commit.p50)) ms, p99 \(ms(commit.p99)) ms \
            (with its WAL flush; the latencies above and below start once it has returned)
              post → feed on the wire   p99 \(ms(post.p99)) ms (goal ≤ 100) \(verdict(post.p99 <= 100 && postsOK)), \
            p50 \(ms(post.p50)) ms; \(posts.count) of \(expected) events, \(stamped(posts).count) stamped
                server CPU per event    \(String(format: "%.1f", postPhase.cpuPerEvent)) µs
            """)
        let idleRows = idle.streams == 0 ? [] : [
            ResultRow("RSS per idle stream (\(idle.streams) streams)", idle.kibPerStream, "KiB", reference: "goal 20 KiB",
                      goal: "<= 20 KiB", met: idle.kibPerStream <= 20),
            ResultRow("idle CPU of \(idle.streams) streams", idle.cpuPercent, "% of a core"),
            ResultRow("RSS per idle keep-alive connection (\(keepAlive.connections), after one GET /health/live)", keepAlive.kib, "KiB"),
        ]
        BenchResults.save("events", idleRows + [
            ResultRow("commit to sync event on the wire p50 (\(users * 5) streams, 2 processes)", poke.p50, "ms", reference: "goal 5 ms",
                      goal: "<= 5 ms", met: poke.p50 <= 5 && pokesOK),
            ResultRow("commit to sync event on the wire p99", poke.p99, "ms", reference: "goal 50 ms", goal: "<= 50 ms", met: poke.p99 <= 50),
            ResultRow("server CPU per sync event (both processes)", pokePhase.cpuPerEvent, "us"),
            ResultRow("post to live feed event on the wire p99 (\(users * 5) feeds)", post.p99, "ms", reference: "goal 100 ms",
                      goal: "<= 100 ms", met: post.p99 <= 100 && postsOK),
        ])
    }
}
