
import BookwormApp
import Foundation
import Logging
import PostgresNIO

/// `BookwormBench nearby`: on the seeded data (1,000,000 copies / 100,000 users in city
/// clusters), 1,000 query points weighted to cities, radius 10 km, limit 50: (a) the project's
/// query, (b) PostGIS `ST_DWithin` + `<->` on a geography GiST index, (c) a full-scan haversine
/// of every copy (and, as a stronger reference, of every pin); same ids from (a) and (b); and
/// HTTP throughput of `/v1/nearby/copies` vs pgbench running the same statement prepared.
struct NearbyBenchmark {
    let points: Int
    let seconds: Int
    let clients: Int
    let port: Int
    let radiusKm = 10.0
    let limit = 50
    let nobody = UUID(uuidString: "00000000-0000-0000-0000-000000000000") ?? UUID()

    func run() async throws {
        let tools = try LoadTools.find()
        let server = try ServerUnderTest.start(port: port)
        defer { server.stop() }
        let database = server.database(psql: tools.psql)
        guard try database.scalar("SELECT count(*) FROM copies") >= 1_000_000 else {
            throw Shell.Failure(description: "seed first: `BookwormBench catalog` seeds 1,000,000 copies")
        }
        if try database.scalar("SELECT count(*) FROM pins") == 0 {
            try Shell.runStreaming(try ServerUnderTest.releaseBinary(), ["seed", "--users", "0", "--books", "0", "--copies", "0"],
                                   environment: server.environment)
        }
        print("setting up PostGIS beside the project's schema…")
        try database.execute(NearbyBenchmarkSQL.postGISSetup)

        let origins = BenchmarkPoints.cityWeighted(count: points)
        let timings = try await server.clientSettings.makeClient(poolSize: 1, logger: Logger(label: "bench")).whileRunning { client in
            try await measure(client: client, origins: origins)
        }

        let throughput = try measureThroughput(tools, database: database, at: Array(origins.prefix(16)))
        report(timings, throughput: throughput)
    }

    struct Throughput {
        var http: [Double] = []
        var prepared: [Double] = []
        var simple: [Double] = []
    }

    /// `/v1/nearby/copies` under wrk beside pgbench running the server's statement, over the
    /// same 16 query points (each request or transaction takes one), both ways pgbench can:
    /// prepared once per connection (as the server runs it) and the default simple protocol
    /// (parsed and planned every time). Three alternating rounds, so a machine that speeds up or
    /// slows down during the run affects all three alike.
    private func measureThroughput(_ tools: LoadTools, database: BenchDatabase,
                                   at origins: [(latitude: Double, longitude: Double)]) throws -> Throughput {
        let token = try BenchAccount.token(curl: tools.curl, base: "http://127.0.0.1:\(port)", username: "nearbybench")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bookworm-nearby-\(getpid())").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var paths: [String] = [], scripts: [String] = []
        for (index, origin) in origins.enumerated() {
            paths.append("/v1/nearby/copies?latitude=\(origin.latitude)&longitude=\(origin.longitude)&radius_km=\(radiusKm)&limit=\(limit)")
            // The server fetches one row more than the page to know whether another page exists.
            let sql = NearbyBenchmarkSQL.nearbyCopies(latitude: origin.latitude, longitude: origin.longitude, radiusKm: radiusKm,
                                                      limit: limit + 1, caller: nobody)
            scripts.append(folder + "/point\(index).sql")
            try (sql + ";\n").write(toFile: scripts[index], atomically: true, encoding: .utf8)
        }
        let lua = folder + "/requests.lua"
        try """
            wrk.headers["Authorization"] = "Bearer \(token)"
            local paths = {\(paths.map { "\"\($0)\"" }.joined(separator: ", "))}
            request = function() return wrk.format(nil, paths[math.random(#paths)]) end
            """.write(toFile: lua, atomically: true, encoding: .utf8)
        let slice = max(seconds / 3, 2)
        var result = Throughput()
        for _ in 0..<3 {
            result.http.append(WrkResult.parse(try Shell.run(tools.wrk, ["-t2", "-c\(clients)", "-d\(slice)s", "-s", lua, "http://127.0.0.1:\(port)"]))
                .successfulPerSecond)
            result.prepared.append(try database.pgbench(tools.pgbench, scripts: scripts, clients: clients, seconds: slice, mode: "prepared"))
            result.simple.append(try database.pgbench(tools.pgbench, scripts: scripts, clients: clients, seconds: slice, mode: "simple"))
        }
        return result
    }

    struct Timings {
        var project: [Double] = []
        var postGIS: [Double] = []
        var fullScan: [Double] = []
        var pinScan: [Double] = []
        var mismatches: [String] = []
        var edgeOnly = 0
        var nonEmpty = 0
    }

    private func measure(client: PostgresClient, origins: [(latitude: Double, longitude: Double)]) async throws -> Timings {
        var timings = Timings()
        let clock = ContinuousClock()
        for (index, origin) in origins.enumerated() {
            let postGISSQL = NearbyBenchmarkSQL.postGIS(latitude: origin.latitude, longitude: origin.longitude,
                                                        radiusKm: radiusKm, limit: limit, caller: nobody)
            var projectRows: [(UUID, Double)] = []
            var postGISRows: [(UUID, Double)] = []
            timings.project.append(try await clock.measure {
                projectRows = try await NearbyBenchmarkSQL.projectPage(client: client, latitude: origin.latitude, longitude: origin.longitude,
                                                                       radiusKm: radiusKm, limit: limit, caller: nobody)
            }.milliseconds)
            timings.postGIS.append(try await clock.measure {
                for try await (id, distance) in try await client.query(PostgresQuery(unsafeSQL: postGISSQL)).decode((UUID, Double).self) {
                    postGISRows.append((id, distance))
                }
            }.milliseconds)
            if index < 20 {
                let full = NearbyBenchmarkSQL.fullScan(latitude: origin.latitude, longitude: origin.longitude,
                                                       radiusKm: radiusKm, limit: limit, caller: nobody)
                timings.fullScan.append(try await run(full, on: client))
                let pins = NearbyBenchmarkSQL.pinScan(latitude: origin.latitude, longitude: origin.longitude,
                                                      radiusKm: radiusKm, limit: limit, caller: nobody)
                timings.pinScan.append(try await run(pins, on: client))
            }
            if !projectRows.isEmpty { timings.nonEmpty += 1 }
            compare(projectRows, postGISRows, at: origin, into: &timings)
        }
        return timings
    }

    private func run(_ sql: String, on client: PostgresClient) async throws -> Double {
        try await ContinuousClock().measure {
            for try await _ in try await client.query(PostgresQuery(unsafeSQL: sql)) {}
        }.milliseconds
    }

    /// Same ids in the same order, except where the difference is a copy within 1 m of the edge.
    private func compare(_ ours: [(UUID, Double)], _ theirs: [(UUID, Double)], at origin: (latitude: Double, longitude: Double),
                         into timings: inout Timings) {
        guard ours.map(\.0) != theirs.map(\.0) else { return }
        let onlyOurs = Set(ours.map(\.0)).symmetricDifference(theirs.map(\.0))
        let distances = Dictionary((ours + theirs).map { ($0.0, $0.1) }, uniquingKeysWith: { first, _ in first })
        if !onlyOurs.isEmpty, onlyOurs.allSatisfy({ abs((distances[$0] ?? 0) - radiusKm) <= 0.001 }) {
            timings.edgeOnly += 1
        } else {
            timings.mismatches.append(String(format: "(%.5f, %.5f)", origin.latitude, origin.longitude))
        }
    }

    private func report(_ timings: Timings, throughput: Throughput) {
        let project = Percentiles(timings.project)
        let postGIS = Percentiles(timings.postGIS)
        let full = Percentiles(timings.fullScan)
        let pins = Percentiles(timings.pinScan)
        let vsPostGIS = project.p50 / max(postGIS.p50, 0.0001)
        let vsFull = full.p50 / max(project.p50, 0.0001)
        let vsPins = pins.p50 / max(project.p50, 0.0001)
        let http = median(throughput.http), prepared = median(throughput.prepared), simple = median(throughput.simple)
        print("")
        print(Table(rows: [
            ["measure (\(points) points, \(Int(radiusKm)) km, limit \(limit))", "p50", "p99", "target", "met"],
            ["(a) project's nearby query", ms(project.p50), ms(project.p99), String(format: "<= 1.2 x (b): %.2f x", vsPostGIS), vsPostGIS <= 1.2 ? "yes" : "NO"],
            ["(b) PostGIS ST_DWithin + <->", ms(postGIS.p50), ms(postGIS.p99), "-", "-"],
            ["(c) full-scan haversine, every copy (\(timings.fullScan.count) points)", ms(full.p50), ms(full.p99),
             String(format: "(a) >= 100 x faster: %.0f x", vsFull), vsFull >= 100 ? "yes" : "NO"],
            ["(c') haversine of every pin, copies by index (\(timings.pinScan.count) points)", ms(pins.p50), ms(pins.p99),
             String(format: "(a) is %.0f x faster", vsPins), "-"],
            ["same ids (a) vs (b)", "\(timings.project.count - timings.mismatches.count) of \(timings.project.count)",
             "\(timings.edgeOnly) differ only at the edge", "all", timings.mismatches.isEmpty ? "yes" : "NO"],
            ["queries with results", "\(timings.nonEmpty) of \(timings.project.count)", "-", "-", "-"],
            throughputRow("HTTP /v1/nearby/copies, \(clients) clients, 16 points", http, "pgbench -M prepared", prepared),
            throughputRow("same HTTP figure", http, "pgbench default (simple)", simple),
        ]).render())
        if !timings.mismatches.isEmpty { print("mismatching points: \(timings.mismatches.prefix(10).joined(separator: ", "))") }
    }

    private func throughputRow(_ label: String, _ http: Double, _ reference: String, _ tps: Double) -> [String] {
        let share = http / max(tps, 0.001)
        return [label, String(format: "%.0f req/s", http), String(format: "%.0f tx/s %@", tps, reference),
                String(format: ">= 50%%: %.0f%%", share * 100), share >= 0.5 ? "yes" : "NO"]
    }

    private func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

    private func ms(_ value: Double) -> String { String(format: "%.2f ms", value) }
}

struct Percentiles {
    let p50: Double
    let p99: Double

    init(_ values: [Double]) {
        let sorted = values.sorted()
        func at(_ q: Double) -> Double { sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))] }
        p50 = at(0.5)
        p99 = at(0.99)
    }
}

extension Duration {
    var milliseconds: Double { Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15 }
}
