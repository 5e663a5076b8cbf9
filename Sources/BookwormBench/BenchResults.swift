import ArgumentParser
import Foundation

/// A benchmark's figures for machines: `.bookworm/bench/results/<benchmark>.json`, a list of
/// rows beside the table it prints, and `BookwormBench summary` (the end of `make bench`), one
/// table of every measure, its reference, ratio and goal.
struct ResultRow: Codable {
    let measure: String
    let value: Double
    let unit: String
    /// What the value is compared with, in words with its own figure.
    let reference: String?
    let ratio: Double?
    let goal: String?
    /// Nil when the row has no goal (a figure for context).
    let met: Bool?

    init(_ measure: String, _ value: Double, _ unit: String, reference: String? = nil, ratio: Double? = nil, goal: String? = nil,
         met: Bool? = nil) {
        self.measure = measure
        self.value = value
        self.unit = unit
        self.reference = reference
        self.ratio = ratio
        self.goal = goal
        self.met = met
    }
}

enum BenchResults {
    static var folder: String {
        (ProcessInfo.processInfo.environment["BOOKWORM_BENCH_DATA_DIR"] ?? ".bookworm/bench") + "/results"
    }

    static func write(_ benchmark: String, _ rows: [ResultRow]) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let path = folder + "/\(benchmark).json"
        try encoder.encode(rows).write(to: URL(fileURLWithPath: path))
        print("results: \(path)")
    }

    /// `write`, for a report that cannot throw: a failure to save is said, not fatal.
    static func save(_ benchmark: String, _ rows: [ResultRow]) {
        do { try write(benchmark, rows) } catch { print("results for \(benchmark) not written: \(error)") }
    }

    static func summary() throws -> String {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: folder))?.filter { $0.hasSuffix(".json") }.sorted() ?? []
        var table = [["benchmark", "measure", "value", "reference", "ratio", "goal", "met"]]
        for file in files {
            let rows = try JSONDecoder().decode([ResultRow].self, from: Data(contentsOf: URL(fileURLWithPath: folder + "/" + file)))
            for row in rows {
                table.append([String(file.dropLast(5)), row.measure, String(format: "%.2f %@", row.value, row.unit), row.reference ?? "-",
                              row.ratio.map { String(format: "%.2f", $0) } ?? "-", row.goal ?? "-",
                              row.met.map { $0 ? "yes" : "NO" } ?? "-"])
            }
        }
        guard table.count > 1 else { return "no results yet in \(folder): run `make bench`" }
        return Table(rows: table).render()
    }
}

struct SummaryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "summary", abstract: "One table of every measure the benchmarks wrote to .bookworm/bench/results.")

    func run() throws {
        print(try BenchResults.summary())
    }
}
