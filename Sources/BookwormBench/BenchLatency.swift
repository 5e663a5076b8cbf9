import Foundation

/// pgbench with every transaction logged, for its tail latency beside wrk's: the issue asks
/// HTTP's p99 to be at most twice pgbench's at the same concurrency.
extension BenchDatabase {
    /// As `pgbench(_:scripts:clients:seconds:mode:)`: transactions per second, and the p99 of
    /// their latencies in milliseconds.
    func pgbenchWithP99(_ pgbench: String, scripts: [String], clients: Int, seconds: Int, mode: String) throws -> (tps: Double, p99: Double) {
        let folder = BenchScratch.url("bookworm-pgbench-\(getpid())-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let text = try Shell.run(pgbench, ["-h", socketDirectory, "-U", "bookworm", "-n", "-M", mode, "-c", "\(clients)", "-j", "2",
                                           "-T", "\(seconds)", "-l", "--log-prefix", folder.appendingPathComponent("log").path]
                                          + scripts.flatMap { ["-f", $0] } + ["bookworm"])
        return (try Self.tps(in: text), Percentiles(try Self.loggedLatencies(in: folder)).p99)
    }

    /// The latencies in milliseconds of pgbench's per-transaction logs (`-l`) in `folder`, each
    /// client's first `warmUp` transactions left out.
    static func loggedLatencies(in folder: URL, after warmUp: Int = 0) throws -> [Double] {
        let logs = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasPrefix("log") }
        // Each line: client, transaction, latency in microseconds, script, epoch seconds, microseconds.
        return try logs.flatMap { name in
            try String(contentsOfFile: folder.appendingPathComponent(name).path, encoding: .utf8).split(separator: "\n")
                .compactMap { line -> Double? in
                    let fields = line.split(separator: " ")
                    guard fields.count > 2, let run = Int(fields[1]), run > warmUp else { return nil }  // numbered from 1
                    return Double(fields[2]).map { $0 / 1000 }
                }
        }
    }

    static func tps(in text: String) throws -> Double {
        let line = text.split(separator: "\n").first { $0.hasPrefix("tps = ") }
        guard let value = line?.split(separator: " ").dropFirst(2).first.flatMap({ Double($0) }) else {
            throw Shell.Failure(description: "could not read pgbench's tps: \(text)")
        }
        return value
    }
}

/// The p99 comparison's table row and result row (goal: HTTP at most 2 x pgbench's).
enum TailLatency {
    static func row(_ label: String, http: Double, pgbench: Double) -> [String] {
        let ratio = http / max(pgbench, 0.001)
        return [label, String(format: "%.2f ms", http), String(format: "%.2f ms pgbench -M prepared", pgbench),
                String(format: "<= 2 x: %.2f x", ratio), ratio <= 2 ? "yes" : "NO"]
    }

    static func result(_ measure: String, http: Double, pgbench: Double) -> ResultRow {
        let ratio = http / max(pgbench, 0.001)
        return ResultRow(measure, http, "ms", reference: String(format: "pgbench -M prepared p99 %.2f ms", pgbench), ratio: ratio,
                         goal: "<= 2 x", met: ratio <= 2)
    }
}

struct Percentiles {
    let p50: Double
    let p90: Double
    let p99: Double

    init(_ values: [Double]) {
        let sorted = values.sorted()
        func at(_ q: Double) -> Double { sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))] }
        p50 = at(0.5)
        p90 = at(0.9)
        p99 = at(0.99)
    }
}

extension Duration {
    var milliseconds: Double { Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15 }
}
