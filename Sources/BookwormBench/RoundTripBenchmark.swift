import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// `BookwormBench roundtrip`: what one trivial statement costs the Swift client, at each layer
/// a store's statement passes through, beside pgbench's figure for the same statement. The
/// floor under every SQL figure the other benchmarks take from Swift.
struct RoundTripBenchmark {
    let runs: Int

    func run() async throws {
        let tools = try LoadTools.find()
        let server = try ServerUnderTest.start(port: 18_080)
        defer { server.stop() }
        let logger = Logger(label: "bench")
        let client = server.clientSettings.makeClient(poolSize: 1, logger: logger)
        let rows = try await client.whileRunning { client in
            let database = Database.forAdministration(client)
            var connectionTimes: [Double] = [], poolTimes: [Double] = [], databaseTimes: [Double] = []
            try await client.withConnection { connection in
                for _ in 0..<runs {
                    connectionTimes.append(try await Self.time { for try await _ in try await connection.query("SELECT 1", logger: logger) {} })
                }
            }
            for _ in 0..<runs {
                poolTimes.append(try await Self.time { for try await _ in try await client.query("SELECT 1", logger: logger) {} })
                databaseTimes.append(try await Self.time { try await database.query("SELECT 1", logger: logger) })
            }
            return [("one connection (PostgresConnection.query)", connectionTimes), ("the pool (PostgresClient.query)", poolTimes),
                    ("the pool with deadlines (Database.query, as stores run)", databaseTimes)]
        }
        let script = BenchScratch.url("bookworm-roundtrip-\(getpid()).sql").path
        try "SELECT 1;\n".write(toFile: script, atomically: true, encoding: .utf8)
        let tps = try server.database(psql: tools.psql).pgbench(tools.pgbench, script: script, clients: 1, seconds: 5, mode: "prepared")
        let pgbenchMillis = 1000 / max(tps, 0.001)
        var table = [["SELECT 1, \(runs) runs", "p50", "p99"]]
        var results: [ResultRow] = []
        for (label, times) in rows {
            let sorted = times.sorted()
            let (p50, p99) = (sorted[sorted.count / 2], sorted[sorted.count * 99 / 100])
            table.append([label, String(format: "%.3f ms", p50), String(format: "%.3f ms", p99)])
            results.append(ResultRow("SELECT 1 p50 through \(label)", p50, "ms", reference: String(format: "pgbench %.3f ms", pgbenchMillis),
                                     ratio: p50 / pgbenchMillis))
        }
        table.append(["pgbench, 1 client, prepared (mean)", String(format: "%.3f ms", pgbenchMillis), "-"])
        print(Table(rows: table).render())
        BenchResults.save("roundtrip", results)
    }

    private static func time(_ body: () async throws -> Void) async throws -> Double {
        try await ContinuousClock().measure { try await body() }.milliseconds
    }
}
