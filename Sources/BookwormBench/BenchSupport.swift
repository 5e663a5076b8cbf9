
import BookwormCore
import Foundation
import Logging

extension Logger {
    /// The bench's own database clients: errors only, so a run's output stays its figures.
    static let benchQuiet: Logger = {
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        return logger
    }()
}

/// Small process helpers for the benchmarks: they drive real binaries (the release server,
/// wrk, curl) the way an operator would.
enum Shell {
    struct Failure: Error, CustomStringConvertible { let description: String }

    /// Runs to completion and returns the output (see `ChildProcess` for why not `Process`).
    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let result = try ChildProcess.run(executable, arguments)
        guard result.status == 0 else {
            throw Failure(description: "\(executable) \(arguments.joined(separator: " ")) failed: \(result.output)")
        }
        return result.output
    }

    /// Runs with the child's output going straight to ours (for progress bars).
    static func runStreaming(_ executable: String, _ arguments: [String], environment: [String: String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure(description: "\(executable) \(arguments.joined(separator: " ")) failed")
        }
    }

    static func which(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}

/// wrk's summary, parsed from its text output (`--latency`).
struct WrkResult {
    var requests = 0
    var non2xx = 0
    var seconds = 0.0
    var p50Millis = 0.0
    var p99Millis = 0.0

    var successfulPerSecond: Double { Double(requests - non2xx) / max(seconds, 0.001) }

    static func parse(_ text: String) -> WrkResult {
        var result = WrkResult()
        for line in text.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            let parts = line.split(separator: " ", omittingEmptySubsequences: true)
            if line.contains("requests in"), let count = Int(parts.first ?? "") {
                result.requests = count
                if let duration = parts.firstIndex(of: "in").map({ parts[$0 + 1] }) {
                    result.seconds = Double(duration.trimmingCharacters(in: CharacterSet(charactersIn: "s,"))) ?? 0
                    if duration.hasSuffix("ms,") { result.seconds /= 1000 }
                    if duration.hasSuffix("m,") && !duration.hasSuffix("ms,") { result.seconds *= 60 }
                }
            } else if line.hasPrefix("Non-2xx"), let count = parts.last.flatMap({ Int($0) }) {
                result.non2xx = count
            } else if line.hasPrefix("50%"), parts.count == 2 {
                result.p50Millis = millis(String(parts[1]))
            } else if line.hasPrefix("99%"), parts.count == 2 {
                result.p99Millis = millis(String(parts[1]))
            }
        }
        return result
    }

    static func millis(_ text: String) -> Double {
        if text.hasSuffix("us") { return (Double(text.dropLast(2)) ?? 0) / 1000 }
        if text.hasSuffix("ms") { return Double(text.dropLast(2)) ?? 0 }
        if text.hasSuffix("m") { return (Double(text.dropLast(1)) ?? 0) * 60_000 }
        if text.hasSuffix("s") { return (Double(text.dropLast(1)) ?? 0) * 1000 }
        return Double(text) ?? 0
    }
}

/// A table printed with aligned columns.
struct Table {
    var rows: [[String]]

    func render() -> String {
        let widths = (0..<(rows.first?.count ?? 0)).map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.enumerated().map { index, row in
            let line = zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: " | ")
            return index == 0 ? line + "\n" + widths.map { String(repeating: "-", count: $0) }.joined(separator: "-+-") : line
        }.joined(separator: "\n")
    }
}

/// A benchmark user on the server under test, and wrk scripts that send its token.
enum BenchAccount {
    static let password = "benchmark password 1"

    /// Registers `username` (harmless if it exists) and signs in.
    static func token(curl: String, base: String, username: String) throws -> String {
        let register = "{\"email\":\"\(username)@example.org\",\"username\":\"\(username)\",\"password\":\"\(password)\"}"
        _ = try? Shell.run(curl, ["-s", "-X", "POST", base + "/v1/auth/register", "-H", "content-type: application/json", "-d", register])
        let login = "{\"login\":\"\(username)\",\"password\":\"\(password)\"}"
        let text = try Shell.run(curl, ["-s", "-X", "POST", base + "/v1/auth/login", "-H", "content-type: application/json", "-d", login])
        guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
              let token = object["token"] as? String else {
            throw Shell.Failure(description: "could not sign in: \(text)")
        }
        return token
    }

    /// A wrk script adding the bearer token and requesting `paths` in turn, one per request.
    /// Each thread formats the requests once (`init`), as pgbench reads its scripts once: formatted
    /// per request in Lua they cost wrk about 10 µs of CPU each, on the cores the server shares.
    static func pathsScript(token: String, paths: [String]) throws -> String {
        let path = BenchScratch.url("bookworm-bench-\(getpid())-\(UUID().uuidString).lua").path
        try """
            wrk.headers["Authorization"] = "Bearer \(token)"
            local paths = {\(paths.map { "\"\($0)\"" }.joined(separator: ", "))}
            local requests = {}
            local next = 0
            init = function(args)
                for i, p in ipairs(paths) do requests[i] = wrk.format(nil, p) end
            end
            request = function()
                next = next % #requests + 1
                return requests[next]
            end
            """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// A wrk script adding the bearer token; `pacedMillis` waits between a connection's requests.
    static func headerScript(token: String, pacedMillis: Int? = nil) throws -> String {
        let path = BenchScratch.url("bookworm-bench-\(getpid())-\(UUID().uuidString).lua").path
        var script = "wrk.headers[\"Authorization\"] = \"Bearer \(token)\"\n"
        if let pacedMillis { script += "function delay()\n    return \(pacedMillis)\nend\n" }
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}

enum Pages {
    /// Follows `next_cursor` from page 1 of `url`, as a client scrolling would; returns the
    /// cursor of the page after the last one walked.
    static func walk(curl: String, url: String, pages: Int, token: String? = nil) throws -> String {
        var cursor = ""
        let auth = token.map { ["-H", "Authorization: Bearer \($0)"] } ?? []
        for index in 0..<pages {
            let text = try Shell.run(curl, ["-sf"] + auth + [url + (cursor.isEmpty ? "" : "&cursor=\(cursor)")])
            guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
                  let next = object["next_cursor"] as? String else {
                throw Shell.Failure(description: "\(url) ended after \(index + 1) pages")
            }
            cursor = next
        }
        return cursor
    }
}

/// The load tools the HTTP-versus-database benchmarks drive, found on PATH.
struct LoadTools {
    let wrk: String
    let curl: String
    let pgbench: String
    let psql: String

    static func find() throws -> LoadTools {
        guard let wrk = Shell.which("wrk"), let curl = Shell.which("curl"), let pgbench = Shell.which("pgbench"),
              let psql = Shell.which("psql") else {
            throw Shell.Failure(description: "wrk, curl, psql and pgbench are needed: run `make bench-deps`")
        }
        return LoadTools(wrk: wrk, curl: curl, pgbench: pgbench, psql: psql)
    }
}

enum BenchTiming {
    /// Seconds per round of `body`: the median of five timed runs of `rounds` rounds each.
    static func secondsPerRound(rounds: Int, _ body: () throws -> Void) throws -> Double {
        var runs: [Double] = []
        for _ in 0..<5 {
            let start = ContinuousClock.now
            for _ in 0..<rounds { try body() }
            runs.append((ContinuousClock.now - start).seconds / Double(rounds))
        }
        return runs.sorted()[2]
    }
}

/// The benchmarks' scripts and scratch files, in one folder of this process's that goes when it
/// exits: each run used to leave its wrk scripts in the temporary directory.
enum BenchScratch {
    static let folder: URL = {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bookworm-bench-\(getpid())")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(at: BenchScratch.folder) }
        return folder
    }()

    static func url(_ name: String) -> URL { folder.appendingPathComponent(name) }
}
