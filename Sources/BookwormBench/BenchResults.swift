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

/// One benchmark's results file: its rows and the run they came from.
struct ResultFile: Codable {
    let date: String
    let commit: String
    let machine: String
    let rows: [ResultRow]
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
        let file = ResultFile(date: ISO8601DateFormatter().string(from: Date()), commit: commit, machine: machine, rows: rows)
        try encoder.encode(file).write(to: URL(fileURLWithPath: path))
        print("results: \(path)")
    }

    /// `write`, for a report that cannot throw: a failure to save is said, not fatal.
    static func save(_ benchmark: String, _ rows: [ResultRow]) {
        do { try write(benchmark, rows) } catch { print("results for \(benchmark) not written: \(error)") }
    }

    /// The checkout's commit, marked when the code (not the documents) had changes.
    static var commit: String {
        guard let git = Shell.which("git"), let head = try? Shell.run(git, ["rev-parse", "--short=10", "HEAD"]) else { return "unknown" }
        let code = ["Sources", "Package.swift", "Makefile"]
        let dirty = (try? Shell.run(git, ["status", "--porcelain", "--untracked-files=no", "--"] + code))?.isEmpty == false
        return head.trimmingCharacters(in: .whitespacesAndNewlines) + (dirty ? " (with changes)" : "")
    }

    /// The CPU model, cores and memory, from /proc.
    static var machine: String {
        let cpu = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?.split(separator: "\n")
            .first { $0.hasPrefix("model name") }?.split(separator: ":", maxSplits: 1).last?.trimmingCharacters(in: .whitespaces)
        let memory = (try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8))?.split(separator: "\n")
            .first { $0.hasPrefix("MemTotal") }?.split(whereSeparator: \.isWhitespace).dropFirst().first.flatMap { Double($0) }
        return "\(cpu ?? "unknown CPU"), \(ProcessInfo.processInfo.activeProcessorCount) cores, "
            + String(format: "%.0f GiB", (memory ?? 0) / 1_048_576)
    }

    /// The results of the newest run: every file written from the same commit as the newest
    /// file. Files of other commits, and files it cannot read, are named in `leftOut`.
    static func files() -> (files: [(benchmark: String, file: ResultFile)], leftOut: [String]) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder))?.filter { $0.hasSuffix(".json") }.sorted() ?? []
        var read: [(benchmark: String, file: ResultFile)] = [], leftOut: [String] = []
        for name in names {
            let url = URL(fileURLWithPath: folder + "/" + name)
            if let file = try? JSONDecoder().decode(ResultFile.self, from: Data(contentsOf: url)) {
                read.append((String(name.dropLast(5)), file))
            } else {
                leftOut.append("\(name) (not a results file of this version)")
            }
        }
        guard let newest = read.max(by: { $0.file.date < $1.file.date }) else { return ([], leftOut) }
        let current = read.filter { $0.file.commit == newest.file.commit }
        leftOut += read.filter { $0.file.commit != newest.file.commit }.map { "\($0.benchmark) (commit \($0.file.commit), \($0.file.date))" }
        return (current, leftOut)
    }

    static func cells(_ benchmark: String, _ row: ResultRow) -> [String] {
        [benchmark, row.measure, String(format: "%.2f %@", row.value, row.unit), row.reference ?? "-",
         row.ratio.map { String(format: "%.2f", $0) } ?? "-", row.goal ?? "-", row.met.map { $0 ? "yes" : "NO" } ?? "-"]
    }

    static let header = ["benchmark", "measure", "value", "reference", "ratio", "goal", "met"]

    static func summary() -> String {
        let (files, leftOut) = files()
        guard !files.isEmpty else { return "no results yet in \(folder): run `make bench`" }
        let table = [header] + files.flatMap { benchmark, file in file.rows.map { cells(benchmark, $0) } }
        return (provenance(files) + leftOutLines(leftOut)).joined(separator: "\n") + "\n\n" + Table(rows: table).render()
    }

    static func leftOutLines(_ leftOut: [String]) -> [String] {
        leftOut.isEmpty ? [] : ["Left out, from another run: " + leftOut.joined(separator: ", ") + "."]
    }

    /// Which run the results come from: one line when every file shares its commit and machine.
    static func provenance(_ files: [(benchmark: String, file: ResultFile)]) -> [String] {
        let dates = files.map(\.file.date).sorted()
        let commits = Set(files.map(\.file.commit)), machines = Set(files.map(\.file.machine))
        guard commits.count == 1, machines.count == 1, let first = dates.first, let last = dates.last else {
            return files.map { "- \($0.benchmark): \($0.file.date), commit \($0.file.commit), \($0.file.machine)" }
        }
        return ["Run from \(first) to \(last), commit \(commits.first ?? ""), on \(machines.first ?? "")."]
    }

    /// The summary as Markdown, written into `document` between its `bench-summary` markers.
    static func writeMarkdown(into document: String) throws {
        let (files, leftOut) = files()
        guard !files.isEmpty else { throw Shell.Failure(description: "no results yet in \(folder): run `make bench`") }
        func line(_ cells: [String]) -> String {
            "| " + cells.map { $0.replacingOccurrences(of: "|", with: "\\|") }.joined(separator: " | ") + " |"
        }
        let table = [line(header), line(header.map { _ in "---" })] + files.flatMap { benchmark, file in file.rows.map { line(cells(benchmark, $0)) } }
        let generated = (provenance(files) + leftOutLines(leftOut) + [""] + table).joined(separator: "\n")
        let text = try String(contentsOfFile: document, encoding: .utf8)
        guard let begin = text.range(of: beginMarker), let end = text.range(of: endMarker), begin.upperBound <= end.lowerBound else {
            throw Shell.Failure(description: "\(document) has no \(beginMarker) … \(endMarker) section")
        }
        let updated = text[..<begin.upperBound] + "\n" + generated + "\n" + text[end.lowerBound...]
        try updated.write(toFile: document, atomically: true, encoding: .utf8)
        print("results table written to \(document)")
    }

    static let beginMarker = "<!-- bench-summary:begin -->"
    static let endMarker = "<!-- bench-summary:end -->"
}

struct SummaryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "summary", abstract: "One table of every measure the benchmarks wrote to .bookworm/bench/results.")

    @Option(help: "Also write the table, as Markdown, into this document between its bench-summary markers.")
    var write: String?

    func run() throws {
        print(BenchResults.summary())
        if let write { try BenchResults.writeMarkdown(into: write) }
    }
}
