import BookwormCore
import Discovery
import Foundation
import Logging
import Places
import PostgresNIO

/// `BookwormBench shelf`, on the catalog and nearby benchmarks' data (1,000,000 copies, 100,000
/// users with pins) plus 500,000 seeded wishes: (a) `GET /v1/me/matches` p50/p99 over HTTP for a
/// London user with 50 wishes and 50 copies; (b) the project's matches query vs the plain
/// two-sided join, same answers; (c) the alert fan-out of a new copy of a book wished by 10,000
/// users: alert rows per second, time to the last row, and the owner's request latency meanwhile.
struct ShelfBenchmark {
    let wishes: Int
    let wishers: Int
    let runs: Int
    let seconds: Int
    let port: Int
    static let matcher = "bench_matcher", fanOwner = "bench_fan_owner", popular = "Bench Bestseller"
    static let london = GeoPoint(latitude: 51.507, longitude: -0.128)

    func run() async throws {
        let tools = try LoadTools.find()
        let server = try ServerUnderTest.start(port: port)
        defer { server.stop() }
        let database = server.database(psql: tools.psql)
        guard try database.scalar("SELECT count(*) FROM copies") >= 1_000_000, try database.scalar("SELECT count(*) FROM pins") > 0 else {
            throw Shell.Failure(description: "seed first: `BookwormBench catalog` (copies), then `BookwormBench nearby` (pins)")
        }
        let base = "http://127.0.0.1:\(port)"
        let matcherToken = try BenchAccount.token(curl: tools.curl, base: base, username: Self.matcher)
        var rounds = 0
        while rounds < 3, try database.scalar("SELECT count(*) FROM wishes") < wishes {
            print("seeding wishes…")
            try database.execute(ShelfBenchmarkSQL.seedWishes(count: wishes))
            rounds += 1
        }
        try database.execute(ShelfBenchmarkSQL.seedMatcher(username: Self.matcher, latitude: Self.london.latitude,
                                                           longitude: Self.london.longitude))
        try database.execute("ANALYZE wishes; ANALYZE alerts;")
        print("wishes: \(try database.scalar("SELECT count(*) FROM wishes")), users: \(try database.scalar("SELECT count(*) FROM users"))")

        let script = try BenchAccount.headerScript(token: matcherToken)
        let http = WrkResult.parse(try Shell.run(tools.wrk, ["-t1", "-c1", "-d\(seconds)s", "--latency", "-s", script, base + "/v1/me/matches"]))
        // As the server's pools run (JIT off): with PostgreSQL's default `jit = on`, compiling
        // the statement took 455 ms of a run the server answers in 15.
        let sql = try await server.withClients { client, _ in try await compareQueries(client: client) }
        let fan = try await server.clientSettings.makeClient(poolSize: 2, logger: Logger(label: "bench")).whileRunning { client in
            try await fanOut(tools: tools, base: base, database: database, client: client)
        }
        report(http: http, sql: sql, fan: fan)
    }

    struct QueryTimings {
        var project: [Double] = []
        var plain: [Double] = []
        var partners = 0
        var same = true
    }

    /// Both queries alternately, `runs` times (the plain join at most as long as 30 s allow).
    private func compareQueries(client: PostgresClient) async throws -> QueryTimings {
        var me: UUID?
        for try await id in try await client.query("SELECT id FROM users WHERE username = \(Self.matcher)").decode(UUID.self) { me = id }
        guard let me else { throw Shell.Failure(description: "no matcher") }
        var origin: GeoPoint?
        let pin = "SELECT p.public_latitude, p.public_longitude FROM pins p WHERE p.is_default AND p.owner_id = $1"
        for try await (lat, lon) in try await client.query(PostgresQuery(unsafeSQL: pin, binds: SQLStatement.bindings([.uuid(me)])))
            .decode((Double, Double).self) { origin = GeoPoint(latitude: lat, longitude: lon) }
        guard let origin else { throw Shell.Failure(description: "the matcher has no default pin") }
        let statement = MatchesStore.partnersStatement(of: me, origin: origin, radiusKm: 25, limit: 20)
        let plain = SQLStatement(sql: ShelfBenchmarkSQL.plainJoin,
                                 values: [.uuid(me), .double(origin.latitude), .double(origin.longitude), .double(25), .int(20)])
        var timings = QueryTimings()
        let clock = ContinuousClock(), started = ContinuousClock.now
        for index in 0..<runs {
            var ours: [String] = [], theirs: [String] = []
            timings.project.append(try await clock.measure { ours = try await Self.answers(statement, client: client) }.milliseconds)
            if index < 5 || ContinuousClock.now - started < .seconds(30) {
                timings.plain.append(try await clock.measure { theirs = try await Self.answers(plain, client: client) }.milliseconds)
                if ours != theirs {
                    timings.same = false
                    print("different answers:\n  project \(ours)\n  plain   \(theirs)")
                }
            }
            timings.partners = ours.count
        }
        return timings
    }

    /// Each partner as "owner distance their-copies my-copies", copies sorted (the plain join
    /// orders them otherwise).
    private static func answers(_ statement: SQLStatement, client: PostgresClient) async throws -> [String] {
        var rows: [String] = []
        for try await (owner, distance, theirs, mine) in try await client.query(statement.query).decode((UUID, Double, [UUID], [UUID]).self) {
            rows.append("\(owner.apiString) \(String(format: "%.6f", distance)) \(theirs.map(\.apiString).sorted()) \(mine.map(\.apiString).sorted())")
        }
        return rows
    }

    private func report(http: WrkResult, sql: QueryTimings, fan: FanOutResult) {
        let project = Percentiles(sql.project), plain = Percentiles(sql.plain)
        print("")
        print(Table(rows: [
            ["measure", "p50", "p99", "reference / target", "met"],
            ["(a) HTTP GET /v1/me/matches (50 wishes, 50 copies)", ms(http.p50Millis), ms(http.p99Millis), "p50 <= 20 ms",
             http.p50Millis <= 20 ? "yes" : "NO"],
            ["(b) project's matches query (\(sql.project.count) runs, \(sql.partners) partners)", ms(project.p50), ms(project.p99),
             String(format: "plain join: p50 %.2f ms, p99 %.2f ms (%d runs): %.1f x faster", plain.p50, plain.p99, sql.plain.count,
                    plain.p50 / max(project.p50, 0.001)),
             sql.same ? "same answers" : "DIFFERENT answers"],
            ["(c) fan-out: \(fan.alerts) alert rows (\(fan.wishes) wishes)", String(format: "%.0f rows/s", fan.rowsPerSecond),
             String(format: "last row %.2f s", fan.seconds), fan.alerts == fan.expected ? "all \(fan.expected) expected" : "expected \(fan.expected)",
             fan.alerts == fan.expected ? "yes" : "NO"],
            ["    owner's POST /v1/me/copies that starts it", ms(fan.postMillis), "-", "-", "-"],
            ["    owner's GET /v1/me/copies idle", ms(fan.idle.p50), ms(fan.idle.p99), "-", "-"],
            ["    owner's GET /v1/me/copies during the fan-out", ms(fan.during.p50), ms(fan.during.p99),
             "\(fan.duringCount) requests", "-"],
        ]).render())
        BenchResults.save("shelf", [
            ResultRow("HTTP matches p50", http.p50Millis, "ms", goal: "<= 20 ms", met: http.p50Millis <= 20),
            ResultRow("matches query p50", project.p50, "ms", reference: String(format: "plain join %.2f ms", plain.p50),
                      ratio: project.p50 / max(plain.p50, 0.001), goal: "same answers", met: sql.same),
            ResultRow("alert fan-out", fan.rowsPerSecond, "rows/s", reference: "\(fan.expected) expected rows",
                      goal: "all rows", met: fan.alerts == fan.expected),
        ])
    }

    private func ms(_ value: Double) -> String { String(format: "%.2f ms", value) }
}
