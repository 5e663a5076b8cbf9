import ArgumentParser
import Foundation

struct GrowthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "growth",
        abstract: "p50/p99 of library search, nearby copies, nearby owners, nearby feed and map pins at several sizes, in one table.")

    @Option(help: "Copies (and posts) per size, comma-separated; users are a tenth, books a fifth.")
    var sizes = "100000,1000000,5000000"
    @Option(help: "City-weighted query points, the same at every size.") var points = 200
    @Option(help: "Seconds each path is timed at each size.") var seconds = 10
    @Option(help: "Port for the server under test.") var port = 18_080

    func run() async throws {
        let parsed = sizes.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }.sorted()
        guard parsed.count >= 2, parsed.allSatisfy({ $0 >= 10_000 }) else {
            throw ValidationError("--sizes needs at least two sizes of 10,000 or more")
        }
        try await GrowthBenchmark(sizes: parsed, points: points, seconds: seconds, port: port).run()
    }
}

/// `BookwormBench growth`: the same requests, from one client, against the same code at each
/// size (up the sizes and back, `run`), each size in its own embedded cluster (`.bookworm/growth/<copies>`, seeded once and
/// kept). Over HTTP, so each figure is what a client waits for, constant costs included.
struct GrowthBenchmark {
    let sizes: [Int]
    let points: Int
    let seconds: Int
    let port: Int

    /// One path's requests, a different query point (or search) each time.
    struct Route {
        let name: String
        let paths: [String]
    }

    func run() async throws {
        let tools = try LoadTools.find()
        let routes = Self.routes(BenchmarkPoints.cityWeighted(count: points))
        // Up the sizes and back down (A B C B A), each size's figures the mean of its visits, so
        // that every size is centred on the same moment and a machine whose speed drifts during
        // the run moves them alike. One pass up measured nearby owners' growth as 1.87 × in a
        // full `make bench` (2026-11-26) and 1.31 × when measured again alone minutes later.
        var visits: [Int: [[String: WrkResult]]] = [:]
        for size in sizes + sizes.reversed().dropFirst() {
            visits[size, default: []].append(try measure(size: size, routes: routes, tools: tools))
        }
        report(visits.mapValues(Self.mean), routes: routes)
    }

    /// Each route's figures over several visits: requests summed, p50 and p99 averaged.
    static func mean(_ visits: [[String: WrkResult]]) -> [String: WrkResult] {
        var combined: [String: WrkResult] = [:]
        for name in Set(visits.flatMap(\.keys)) {
            let results = visits.compactMap { $0[name] }
            var mean = WrkResult()
            mean.requests = results.reduce(0) { $0 + $1.requests }
            mean.non2xx = results.reduce(0) { $0 + $1.non2xx }
            mean.seconds = results.reduce(0) { $0 + $1.seconds }
            mean.p50Millis = results.reduce(0) { $0 + $1.p50Millis } / Double(max(results.count, 1))
            mean.p99Millis = results.reduce(0) { $0 + $1.p99Millis } / Double(max(results.count, 1))
            combined[name] = mean
        }
        return combined
    }

    private func measure(size: Int, routes: [Route], tools: LoadTools) throws -> [String: WrkResult] {
        let server = try ServerUnderTest.start(port: port, dataDirectory: ".bookworm/growth/\(size)")
        defer { server.stop() }
        let database = server.database(psql: tools.psql)
        try seed(size: size, server: server, database: database)
        // Every table and index read once: the figures are of the statements, not of the disk.
        try database.execute("""
            CREATE EXTENSION IF NOT EXISTS pg_prewarm;
            SELECT count(pg_prewarm(c.oid::regclass, 'buffer')) FROM pg_class c
            WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'i');
            """)
        let token = try BenchAccount.token(curl: tools.curl, base: "http://127.0.0.1:\(port)", username: "growthbench")
        var results: [String: WrkResult] = [:]
        for route in routes {
            let script = try BenchAccount.pathsScript(token: token, paths: route.paths)
            let warm = try warmUp(script: script, tools: tools, database: database)
            let result = WrkResult.parse(try Shell.run(tools.wrk, ["-t1", "-c1", "-d\(seconds)s", "--latency", "-s", script,
                                                                   "http://127.0.0.1:\(port)"]))
            if result.non2xx > 0 { print("warning: \(route.name) at \(size): \(result.non2xx) of \(result.requests) answers not 2xx") }
            results[route.name] = result
            print(String(format: "%9d copies  %-16@ p50 %7.2f ms  p99 %7.2f ms  (warm-up %d s, %d blocks read)", size, route.name,
                         result.p50Millis, result.p99Millis, warm.seconds, warm.blocksRead))
        }
        return results
    }

    /// The route's own requests, a second at a time, until two seconds running read fewer than
    /// 100 blocks from outside the shared buffers (at most 30 s). At 5M copies the cluster is
    /// larger than its shared buffers, so the prewarm above leaves whatever it read last, and the
    /// operating system drops cold pages within seconds: one second of warm-up then left the
    /// 5M nearby pages reading 42,670 blocks in the timed run (p99 6.81 ms against 3.3 at 100k,
    /// 2026-11-26). The figures are of the statements on their working set, not of the disk.
    private func warmUp(script: String, tools: LoadTools, database: BenchDatabase) throws -> (seconds: Int, blocksRead: Int) {
        let readSQL = "SELECT blks_read FROM pg_stat_database WHERE datname = current_database()"
        var quiet = 0, seconds = 0, total = 0, before = try database.scalar(readSQL)
        while quiet < 2, seconds < 30 {
            _ = try Shell.run(tools.wrk, ["-t1", "-c1", "-d1s", "-s", script, "http://127.0.0.1:\(port)"])
            seconds += 1
            let after = try database.scalar(readSQL)
            quiet = after - before < 100 ? quiet + 1 : 0
            total += after - before
            before = after
        }
        return (seconds, total)
    }

    /// Users a tenth of the copies and books a fifth, as in the other benchmarks' 1,000,000; as
    /// many posts as copies. Only what is missing is added.
    private func seed(size: Int, server: ServerUnderTest, database: BenchDatabase) throws {
        let users = max(0, size / 10 - (try database.scalar("SELECT count(*) FROM users")))
        let books = max(0, size / 5 - (try database.scalar("SELECT count(*) FROM books")))
        let copies = max(0, size - (try database.scalar("SELECT count(*) FROM copies")))
        let posts = max(0, size - (try database.scalar("SELECT count(*) FROM posts")))
        guard users + books + copies + posts > 0 else { return }
        print("seeding \(server.dataDirectory): \(users) users, \(books) books, \(copies) copies, \(posts) posts…")
        try Shell.runStreaming(try ServerUnderTest.releaseBinary(),
                               ["seed", "--users", "\(users)", "--books", "\(books)", "--copies", "\(copies)", "--posts", "\(posts)"],
                               environment: server.environment)
    }

    /// A `q` of a title word and the start of an author's name, as a person types one.
    static let searches = ["shadow garc", "river sara", "winter nakam", "memory silva", "ocean chen", "forest kim",
                           "garden dubo", "stone rossi", "light okaf", "paper sharma", "crown park", "storm costa"]

    static func routes(_ origins: [(latitude: Double, longitude: Double)]) -> [Route] {
        let near = origins.map { "latitude=\($0.latitude)&longitude=\($0.longitude)&radius_km=10" }
        // A phone's city view: about 11 km by 10 km around the point. Beside the antimeridian its
        // edges wrap, as a map client sends them (west > east crosses it).
        func wrapped(_ longitude: Double) -> Double { longitude > 180 ? longitude - 360 : longitude < -180 ? longitude + 360 : longitude }
        let boxes = origins.map { String(format: "%.4f,%.4f,%.4f,%.4f", wrapped($0.longitude - 0.075), $0.latitude - 0.045,
                                         wrapped($0.longitude + 0.075), $0.latitude + 0.045) }
        return [
            Route(name: "library search", paths: searches.map { "/v1/copies?limit=20&q=" + $0.replacingOccurrences(of: " ", with: "%20") }),
            Route(name: "nearby copies", paths: near.map { "/v1/nearby/copies?\($0)&limit=50" }),
            Route(name: "nearby owners", paths: near.map { "/v1/nearby/owners?\($0)&limit=50" }),
            Route(name: "nearby feed", paths: near.map { "/v1/posts?\($0)&limit=20" }),
            Route(name: "map pins", paths: boxes.map { "/v1/map/pins?bbox=\($0)&zoom=13" }),
        ]
    }
}

extension GrowthBenchmark {
    /// A cost of `a + b·log n` grows from the smallest size to the largest by at most
    /// log(largest) ÷ log(smallest); a quarter more is allowed for the noise of two machines' runs.
    func report(_ figures: [Int: [String: WrkResult]], routes: [Route]) {
        guard let small = sizes.first, let large = sizes.last else { return }
        let bound = log(Double(large)) / log(Double(small))
        var table = [["path"] + sizes.map { "\(Self.label($0)): p50 / p99" } + ["p50 \(Self.label(small)) → \(Self.label(large))", "log bound", "flat"]]
        var rows: [ResultRow] = []
        for route in routes {
            let cells = sizes.map { figures[$0]?[route.name] ?? WrkResult() }
            let growth = (cells.last?.p50Millis ?? .nan) / max(cells.first?.p50Millis ?? .nan, 0.001)
            let flat = growth <= bound * 1.25
            table.append([route.name] + cells.map { String(format: "%.2f / %.2f ms", $0.p50Millis, $0.p99Millis) }
                         + [String(format: "%.2f ×", growth), String(format: "%.2f ×", bound), flat ? "yes" : "NO"])
            for (size, cell) in zip(sizes, cells) {
                rows.append(ResultRow("\(route.name) p50 at \(Self.label(size)) copies (HTTP, 1 client)", cell.p50Millis, "ms"))
                rows.append(ResultRow("\(route.name) p99 at \(Self.label(size)) copies (HTTP, 1 client)", cell.p99Millis, "ms"))
            }
            rows.append(ResultRow("\(route.name) p50 growth \(Self.label(small)) → \(Self.label(large))", growth, "x",
                                  reference: String(format: "log bound %.2f ×", bound), ratio: growth / bound,
                                  goal: String(format: "<= %.2f x (log + 25 %%)", bound * 1.25), met: flat))
        }
        print("")
        print(Table(rows: table).render())
        BenchResults.save("growth", rows)
    }

    static func label(_ size: Int) -> String {
        size >= 1_000_000 && size % 1_000_000 == 0 ? "\(size / 1_000_000)M" : size >= 1000 && size % 1000 == 0 ? "\(size / 1000)k" : "\(size)"
    }
}
