import BookwormApp
import BookwormCore
import Discovery
import Foundation
import Logging
import Places
import PostgresNIO

/// `BookwormBench nearby`: on the seeded data (1,000,000 copies / 100,000 users in city
/// clusters), 1,000 query points weighted to cities, radius 10 km, limit 50: (a) the project's
/// query, (b) PostGIS as a skilled user writes it (geography GiST, `<->` order kept down to the
/// `LIMIT`, prepared), the floor (the 50 nearest pins alone, by either index), (c) a full-scan
/// haversine of every copy; same ids from (a) and (b) at every point; (d) nearby owners beside
/// (e) their PostGIS reference, same owners and counts at every point; and HTTP throughput of
/// `/v1/nearby/copies` vs pgbench running the same statement prepared.
struct NearbyBenchmark {
    let points: Int
    let seconds: Int
    let clients: Int
    let port: Int
    let radiusKm = 10.0
    let limit = 50
    /// The caller of pgbench's throughput scripts: no user, so no blocks, as the HTTP runs' accounts.
    let nobody = UUID(uuidString: "00000000-0000-0000-0000-000000000000") ?? UUID()
    /// The caller of the comparison with PostGIS: a user with blocks both ways (`viewerSetup`).
    let viewer = UUID(uuidString: "00000000-0000-0000-0000-00000000b10c") ?? UUID()

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
        try database.execute(NearbyBenchmarkSQL.viewerSetup(viewer))
        try database.execute(NearbyBenchmarkSQL.prewarm)

        let origins = BenchmarkPoints.cityWeighted(count: points)
        let (timings, sparse) = try await server.withClients { client, asServer in
            (try await measure(client: client, asServer: asServer, origins: origins),
             try await SparseNearby.measure(client: client, origins: Array(origins.prefix(200)), radiusKm: radiusKm, limit: limit, caller: viewer))
        }

        let (throughput, split) = try measureThroughput(tools, server: server, database: database, at: Array(origins.prefix(16)))
        try report(timings, throughput: throughput, split: split, sparse: sparse)
    }

    /// `/v1/nearby/copies` under wrk beside pgbench running the server's statement, over the
    /// same 16 query points (each request or transaction takes one), both ways pgbench can:
    /// prepared once per connection (as the server runs it) and the default simple protocol
    /// (parsed and planned every time), in alternating rounds (`PairedThroughput`).
    /// Then the same on split CPUs (`PairedThroughput.measureSplit`).
    private func measureThroughput(_ tools: LoadTools, server: ServerUnderTest, database: BenchDatabase,
                                   at origins: [(latitude: Double, longitude: Double)]) throws -> (PairedThroughput, SplitThroughput?) {
        let token = try BenchAccount.token(curl: tools.curl, base: "http://127.0.0.1:\(port)", username: "nearbybench")
        let folder = BenchScratch.url("bookworm-nearby-\(getpid())").path
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
        let lua = try BenchAccount.pathsScript(token: token, paths: paths)
        let target = ["-s", lua, "http://127.0.0.1:\(port)"]
        return (try PairedThroughput.measure(tools, server: server, database: database, target: target, scripts: scripts, clients: clients, seconds: seconds),
                try PairedThroughput.measureSplit(tools, server: server, database: database, target: target, scripts: scripts,
                                                  clients: clients, seconds: seconds))
    }

    struct Timings {
        var project: [Double] = []
        /// The project's statement timed as the references are: raw rows, warm, one connection.
        var projectSQL: [Double] = []
        var postGIS: [Double] = []
        var cubeFloor: [Double] = []
        var postGISFloor: [Double] = []
        var fullScan: [Double] = []
        var mismatches: [String] = []
        var edgeOnly = 0
        var nonEmpty = 0
        /// Points whose page took more than one round of nearest pins.
        var moreRounds = 0
        /// Points whose page the viewer's blocks change (against a caller without blocks).
        var changedByBlocks = 0
        /// Each point's (project, PostGIS) milliseconds, to name the points behind the p99.
        var byPoint: [(project: Double, postGIS: Double, origin: String)] = []
        var ownersProject: [Double] = []
        var ownersPostGIS: [Double] = []
        var ownersMoreRounds = 0
        /// Points where the owners or their matching copies differ, with both sides' counts of owners.
        var ownersMismatches: [String] = []
    }

    /// Per point, alternating: the project's page (prepared, as the server runs it), the
    /// best-practice PostGIS page, and the two floors; every statement prepared on the one
    /// connection, so none pays for parsing or planning.
    private func measure(client: PostgresClient, asServer: Database, origins: [(latitude: Double, longitude: Double)]) async throws
        -> Timings
    {
        var timings = Timings()
        let clock = ContinuousClock()
        for (index, origin) in origins.enumerated() {
            var projectRows: [(UUID, Double)] = []
            timings.project.append(try await clock.measure {
                projectRows = try await NearbyBenchmarkSQL.projectPage(database: asServer, latitude: origin.latitude, longitude: origin.longitude,
                                                                       radiusKm: radiusKm, limit: limit, caller: viewer)
            }.milliseconds)
            let postGISRows = try await client.withConnection { connection -> [(UUID, Double)] in
                let reference = NearbyReferences.literalPostGIS(latitude: origin.latitude, longitude: origin.longitude,
                                                                radiusKm: radiusKm, limit: limit, caller: viewer)
                let (elapsed, rows) = try await NearbyReferences.timePrepared(reference, on: connection)
                timings.postGIS.append(elapsed)
                // Run once to warm as the reference is (its first execution plans and warms it).
                let query = NearbyQuery(origin: GeoPoint(latitude: origin.latitude, longitude: origin.longitude), radiusKm: radiusKm,
                                        callerID: viewer)
                _ = try await NearbyReferences.timeProject(query, limit: limit, runs: 1, on: connection)
                let (projectElapsed, _, rounds) = try await NearbyReferences.timeProject(query, limit: limit, on: connection)
                timings.projectSQL.append(projectElapsed)
                timings.byPoint.append((projectElapsed, elapsed, String(format: "(%.4f, %.4f)", origin.latitude, origin.longitude)))
                if rounds > 1 { timings.moreRounds += 1 }
                timings.cubeFloor.append(try await NearbyReferences.time(
                    NearbyReferences.CubeFloor(latitude: origin.latitude, longitude: origin.longitude, limit: limit), on: connection).0)
                timings.postGISFloor.append(try await NearbyReferences.time(
                    NearbyReferences.PostGISFloor(latitude: origin.latitude, longitude: origin.longitude, limit: limit), on: connection).0)
                try await measureOwners(query, at: origin, on: connection, into: &timings)
                return try rows.map { row in
                    let cells = PostgresRandomAccessRow(row)
                    return (try cells[0].decode(UUID.self), try cells[1].decode(Double.self))
                }
            }
            let unblocked = try await NearbyBenchmarkSQL.projectPage(database: asServer, latitude: origin.latitude,
                                                                     longitude: origin.longitude, radiusKm: radiusKm, limit: limit, caller: nobody)
            if unblocked.map(\.0) != projectRows.map(\.0) { timings.changedByBlocks += 1 }
            if index < 20 {
                let full = NearbyBenchmarkSQL.fullScan(latitude: origin.latitude, longitude: origin.longitude,
                                                       radiusKm: radiusKm, limit: limit, caller: viewer)
                timings.fullScan.append(try await run(full, on: client))
            }
            if !projectRows.isEmpty { timings.nonEmpty += 1 }
            compare(projectRows, postGISRows, at: origin, into: &timings)
        }
        return timings
    }

    /// Nearby owners, the project's statement in its rounds beside the PostGIS reference, both
    /// warmed once; the owners and each one's matching copies must be the same.
    private func measureOwners(_ query: NearbyQuery, at origin: (latitude: Double, longitude: Double), on connection: PostgresConnection,
                               into timings: inout Timings) async throws {
        let reference = NearbyReferences.literalPostGISOwners(latitude: origin.latitude, longitude: origin.longitude,
                                                              radiusKm: radiusKm, limit: limit, caller: viewer)
        let (elapsed, rows) = try await NearbyReferences.timePrepared(reference, on: connection)
        timings.ownersPostGIS.append(elapsed)
        _ = try await NearbyReferences.timeProjectOwners(query, limit: limit, runs: 1, on: connection)
        let (projectElapsed, ours, rounds) = try await NearbyReferences.timeProjectOwners(query, limit: limit, on: connection)
        timings.ownersProject.append(projectElapsed)
        if rounds > 1 { timings.ownersMoreRounds += 1 }
        let theirs = try rows.map { row in
            let cells = PostgresRandomAccessRow(row)
            return NearbyReferences.OwnerKey(id: try cells[0].decode(UUID.self), matching: try cells[2].decode(Int64.self))
        }
        if ours != theirs {
            timings.ownersMismatches.append(String(format: "(%.5f, %.5f): %d vs %d owners", origin.latitude, origin.longitude,
                                                   ours.count, theirs.count))
        }
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

    private func report(_ timings: Timings, throughput: PairedThroughput, split: SplitThroughput?, sparse: SparseNearby) throws {
        let server = Percentiles(timings.project), project = Percentiles(timings.projectSQL), postGIS = Percentiles(timings.postGIS)
        let cube = Percentiles(timings.cubeFloor), gisFloor = Percentiles(timings.postGISFloor), full = Percentiles(timings.fullScan)
        let ratio50 = project.p50 / max(postGIS.p50, 0.0001), ratio99 = project.p99 / max(postGIS.p99, 0.0001)
        let vsFull = full.p50 / max(project.p50, 0.0001)
        let owners = Percentiles(timings.ownersProject), gisOwners = Percentiles(timings.ownersPostGIS)
        let owners50 = owners.p50 / max(gisOwners.p50, 0.0001), owners99 = owners.p99 / max(gisOwners.p99, 0.0001)
        let http = throughput.httpRate, prepared = throughput.preparedRate, simple = throughput.simpleRate
        let sameIDs = timings.project.count - timings.mismatches.count
        print("")
        print(Table(rows: [
            ["measure (\(points) points, \(Int(radiusKm)) km, limit \(limit))", "p50", "p99", "vs best PostGIS (goal <= 1.0 x)", "met"],
            ["(a) project's nearby statement (prepared, timed as (b) is)", ms(project.p50), ms(project.p99),
             String(format: "p50 %.2f x, p99 %.2f x", ratio50, ratio99), ratio50 <= 1 && ratio99 <= 1 ? "yes" : "NO"],
            ["    the same page as the server gets it (NearbyStore)", ms(server.p50), ms(server.p99), "-", "-"],
            ["(b) PostGIS best practice: geography GiST, <-> kept to the LIMIT (prepared)", ms(postGIS.p50), ms(postGIS.p99), "-", "-"],
            ["floor: the \(limit) nearest pins alone, cube KNN", ms(cube.p50), ms(cube.p99),
             String(format: "(a) spends %.2f ms past it at p50", project.p50 - cube.p50), "-"],
            ["floor: the \(limit) nearest pins alone, PostGIS KNN", ms(gisFloor.p50), ms(gisFloor.p99), "-", "-"],
            ["(c) full-scan haversine, every copy (\(timings.fullScan.count) points)", ms(full.p50), ms(full.p99),
             String(format: "(a) is %.0f x faster", vsFull), "-"],
            ["same ids (a) vs (b)", "\(sameIDs) of \(timings.project.count)", "\(timings.edgeOnly) differ only at the edge", "all",
             timings.mismatches.isEmpty ? "yes" : "NO"],
            ["queries with results", "\(timings.nonEmpty) of \(timings.project.count)", "-", "-", "-"],
            ["pages the viewer's blocks change (2,000 owners blocked either way)", "\(timings.changedByBlocks) of \(timings.project.count)",
             "-", "-", "-"],
            ["pages needing a second round of pins (first round \(NearbyStore.firstPinLimit(limit: limit)))",
             "\(timings.moreRounds) of \(timings.project.count)", "-", "-", "-"],
            ["(d) project's nearby owners statement (prepared, timed as (e) is)", ms(owners.p50), ms(owners.p99),
             String(format: "p50 %.2f x, p99 %.2f x", owners50, owners99), owners50 <= 1 && owners99 <= 1 ? "yes" : "NO"],
            ["(e) PostGIS owners: <-> to the LIMIT, nearest holding pin per owner (prepared)", ms(gisOwners.p50), ms(gisOwners.p99), "-", "-"],
            ["same owners and matching copies (d) vs (e)", "\(timings.ownersProject.count - timings.ownersMismatches.count) of \(timings.ownersProject.count)",
             "-", "all", timings.ownersMismatches.isEmpty ? "yes" : "NO"],
            ["owners pages needing a second round (first round \(NearbyStore.firstOwnersPinLimit(limit: limit)))",
             "\(timings.ownersMoreRounds) of \(timings.ownersProject.count)", "-", "-", "-"],
            ["HTTP /v1/nearby/copies, \(clients) clients, 16 points", String(format: "%.0f req/s", http),
             String(format: "%.0f tx/s pgbench -M prepared", prepared), String(format: ">= 0.8 x: %.2f x", throughput.ratio),
             throughput.ratio >= 0.8 ? "yes" : "NO"],
            ["    each round's ratio (\(throughput.ratios.count) rounds, median above)", throughput.spread, "-", "-", "-"],
            ["same HTTP figure", String(format: "%.0f req/s", http), String(format: "%.0f tx/s pgbench default (simple)", simple),
             String(format: "%.2f x", http / max(simple, 0.001)), "-"],
            TailLatency.row("    p99 at \(clients) clients", http: throughput.httpP99, pgbench: throughput.preparedP99),
        ] + (throughput.cpuRow.map { [$0] } ?? []) + (split.map { [$0.tableRow] } ?? [])).render())
        throughput.printRounds("nearby copies")
        if !timings.mismatches.isEmpty { print("mismatching points: \(timings.mismatches.prefix(10).joined(separator: ", "))") }
        if !timings.ownersMismatches.isEmpty { print("owners differ at: \(timings.ownersMismatches.prefix(10).joined(separator: ", "))") }
        let slowest = timings.byPoint.sorted { $0.project > $1.project }.prefix(5)
            .map { String(format: "%@ %.2f ms (PostGIS %.2f)", $0.origin, $0.project, $0.postGIS) }
        print("nearby copies, slowest points: " + slowest.joined(separator: ", "))
        sparse.print()
        let best = "PostGIS best practice"
        try BenchResults.write("nearby", [
            ResultRow("nearby copies p50", project.p50, "ms", reference: String(format: "%@ %.2f ms", best, postGIS.p50), ratio: ratio50,
                      goal: "<= 1.0 x", met: ratio50 <= 1),
            ResultRow("nearby copies p99", project.p99, "ms", reference: String(format: "%@ %.2f ms", best, postGIS.p99), ratio: ratio99,
                      goal: "<= 1.0 x", met: ratio99 <= 1),
            ResultRow("nearby copies p50 as the server gets it (NearbyStore)", server.p50, "ms"),
            ResultRow("nearby owners p50", owners.p50, "ms", reference: String(format: "%@ %.2f ms", best, gisOwners.p50), ratio: owners50,
                      goal: "<= 1.0 x", met: owners50 <= 1),
            ResultRow("nearby owners p99", owners.p99, "ms", reference: String(format: "%@ %.2f ms", best, gisOwners.p99), ratio: owners99,
                      goal: "<= 1.0 x", met: owners99 <= 1),
            ResultRow("nearby owners, same owners and counts as PostGIS", Double(timings.ownersProject.count - timings.ownersMismatches.count),
                      "points", reference: "\(timings.ownersProject.count) points", goal: "all", met: timings.ownersMismatches.isEmpty),
            ResultRow("nearest 50 pins, cube KNN (floor) p50", cube.p50, "ms"),
            ResultRow("nearest 50 pins, PostGIS KNN (floor) p50", gisFloor.p50, "ms"),
            ResultRow("nearby copies, same ids as PostGIS", Double(sameIDs), "points", reference: "\(timings.project.count) points",
                      goal: "all", met: timings.mismatches.isEmpty),
            ResultRow("HTTP nearby, \(clients) clients", http, "req/s", reference: String(format: "pgbench prepared %.0f tx/s", prepared),
                      ratio: throughput.ratio, goal: ">= 0.8 x", met: throughput.ratio >= 0.8),
            TailLatency.result("HTTP nearby p99, \(clients) clients", http: throughput.httpP99, pgbench: throughput.preparedP99),
        ] + throughput.cpuResults("HTTP nearby, \(clients) clients", serverShareGoal: 0.5) + (split.map { [$0.result("HTTP nearby, \(clients) clients")] } ?? []) + sparse.rows)
    }

    private func ms(_ value: Double) -> String { String(format: "%.2f ms", value) }
}
