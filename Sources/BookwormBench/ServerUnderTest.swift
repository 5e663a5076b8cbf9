
import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// The release `bookworm serve` binary as a child process on the embedded database under
/// `.bookworm/bench`, so the figures include the real HTTP stack, driver and PostgreSQL.
final class ServerUnderTest {
    let process: Process
    let environment: [String: String]
    var dataDirectory: String {
        let path = environment["BOOKWORM_DATA_DIR"] ?? ".bookworm/bench"
        return path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    }

    private init(process: Process, environment: [String: String]) {
        self.process = process
        self.environment = environment
    }

    /// `dataDirectory`: another embedded cluster than the benchmark's own (the growth table's sizes).
    static func start(port: Int, arguments: [String] = ["serve"], dataDirectory: String? = nil) throws -> ServerUnderTest {
        let binary = try releaseBinary()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["BOOKWORM_PORT"] = String(port)
        environment["BOOKWORM_DATA_DIR"] = dataDirectory ?? environment["BOOKWORM_BENCH_DATA_DIR"] ?? ".bookworm/bench"
        environment["LOG_LEVEL"] = "warning"
        environment["BOOKWORM_SHUTDOWN_DRAIN_SECONDS"] = environment["BOOKWORM_SHUTDOWN_DRAIN_SECONDS"] ?? "0"
        // The benchmark's login storm is legitimate traffic from one address.
        environment["BOOKWORM_HASH_QUEUE"] = environment["BOOKWORM_HASH_QUEUE"] ?? "256"
        // So are the benchmark's dozens of accounts, all registered from 127.0.0.1.
        environment["BOOKWORM_REGISTER_MAX_PER_HOUR"] = environment["BOOKWORM_REGISTER_MAX_PER_HOUR"] ?? "100000"
        // The trades benchmark has each borrower ask one lender for a hundred copies at once.
        environment["BOOKWORM_NOTIFY_PER_RECIPIENT_PER_DAY"] = environment["BOOKWORM_NOTIFY_PER_RECIPIENT_PER_DAY"] ?? "10000"
        environment["BOOKWORM_NOTIFY_PER_SENDER_PER_HOUR"] = environment["BOOKWORM_NOTIFY_PER_SENDER_PER_HOUR"] ?? "100000"
        environment["DATABASE_URL"] = nil
        process.environment = environment
        try keepDataInSharedBuffers(environment["BOOKWORM_DATA_DIR"] ?? ".bookworm/bench")
        // Another run's server still on the port would answer for this one, which then fails to bind.
        if let curl = Shell.which("curl"), (try? Shell.run(curl, ["-s", "-o", "/dev/null", "--max-time", "2", "http://127.0.0.1:\(port)/health/live"])) != nil {
            throw Shell.Failure(description: "port \(port) is in use (another benchmark's server?)")
        }
        try process.run()
        let server = ServerUnderTest(process: process, environment: environment)
        do {
            try server.waitUntilReady(port: port)
            try server.dropLeftoverJobs()
        } catch {
            server.stop()
            throw error
        }
        return server
    }

    /// One-off jobs earlier runs left queued (the wish alerts of the copies a storm of imports
    /// listed: 100,000 of them) would otherwise run beside this run's measures, on its server.
    private func dropLeftoverJobs() throws {
        guard let psql = Shell.which("psql") else { return print("psql not found: jobs earlier runs left queued are not dropped") }
        let dropped = try database(psql: psql).scalar(
            "WITH gone AS (DELETE FROM jobs WHERE run_at = '-infinity' RETURNING 1) SELECT count(*) FROM gone")
        if dropped > 0 { print("dropped \(dropped) one-off jobs earlier runs left queued") }
    }

    /// Gives an existing benchmark cluster a quarter of the memory (at most 8 GB) as shared
    /// buffers, where the product's default is 256 MB. This machine's kernel pages out cold
    /// page-cache pages within seconds (DAMON reclaim), so data read into the operating
    /// system's cache alone was read from disk again between runs and measured the disk
    /// (PostGIS's p50 went from 0.57 to 0.99 ms); shared memory stays put without swap. A new
    /// cluster gets it from its second start on. Both sides of every comparison share it.
    static func keepDataInSharedBuffers(_ dataDirectory: String) throws {
        let conf = dataDirectory + "/postgres/postgresql.conf"
        guard var text = try? String(contentsOfFile: conf, encoding: .utf8) else { return }
        let marker = "# BookwormBench: shared buffers"
        guard !text.contains(marker) else { return }
        let bytes = Int(sysconf(Int32(_SC_PHYS_PAGES))) * Int(sysconf(Int32(_SC_PAGESIZE)))
        let megabytes = min(bytes / 4 / (1 << 20), 8192)
        text += "\n\(marker)\nshared_buffers = \(max(megabytes, 256))MB\n"
        try text.write(toFile: conf, atomically: true, encoding: .utf8)
    }

    /// Built next to this benchmark by `make bench` (`swift build -c release --product bookworm`).
    static func releaseBinary() throws -> String {
        let here = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        let candidate = here.appendingPathComponent("bookworm").path
        if !FileManager.default.isExecutableFile(atPath: candidate), let swift = Shell.which("swift") {
            print("building the release server (swift build -c release --product bookworm)…")
            try Shell.run(swift, ["build", "-c", "release", "--product", "bookworm"])
        }
        guard FileManager.default.isExecutableFile(atPath: candidate) else {
            throw Shell.Failure(description: "release server not found at \(candidate); run `make bench`")
        }
        return candidate
    }

    func waitUntilReady(port: Int) throws {
        guard let curl = Shell.which("curl") else { throw Shell.Failure(description: "curl not found") }
        let deadline = Date().addingTimeInterval(180)
        while Date() < deadline {
            if process.isRunning == false { throw Shell.Failure(description: "the server exited during start-up") }
            if (try? Shell.run(curl, ["-sf", "http://127.0.0.1:\(port)/health/ready"])) != nil { return }
            Thread.sleep(forTimeInterval: 0.5)
        }
        throw Shell.Failure(description: "the server was not ready within 180 s")
    }

    /// The embedded cluster's socket, for the benchmark's own PostgreSQL client.
    var clientSettings: DatabaseSettings {
        DatabaseSettings(endpoint: .socket(path: dataDirectory + "/postgres/.s.PGSQL.5432"), username: "bookworm",
                         password: nil, database: "bookworm")
    }

    /// A client of one connection, and the same as a `Database` with a generic-plan pool beside
    /// it, as the server's pools are (`pools` in `Application+build.swift`), for the rows that
    /// time a page "as the server gets it". Both with JIT off, as the server's pools: a generic
    /// plan's estimate can pass `jit_above_cost` and spend 17 ms compiling a 0.4 ms statement.
    func withClients<T: Sendable>(_ body: @Sendable (PostgresClient, Database) async throws -> T) async throws -> T {
        let logger = Logger(label: "bench"), settings = clientSettings
        let client = PostgresClient(configuration: settings.clientConfiguration(poolSize: 1, statementTimeout: .seconds(3600)),
                                    backgroundLogger: logger)
        return try await client.whileRunning { client in
            let generic = PostgresClient(configuration: settings.clientConfiguration(poolSize: 1, statementTimeout: .seconds(3600),
                                                                                     genericPlans: true),
                                         backgroundLogger: logger)
            return try await generic.whileRunning { generic in
                try await body(client, Database.forAdministration(client).withGenericPlans(GenericPlanPool(.forAdministration(generic))))
            }
        }
    }

    /// psql and pgbench against the embedded cluster.
    func database(psql: String) -> BenchDatabase { BenchDatabase(psql: psql, socketDirectory: dataDirectory + "/postgres") }

    /// The embedded cluster's postmaster (the first line of its `postmaster.pid`).
    func postmasterPID() throws -> Int32 {
        let text = try String(contentsOfFile: dataDirectory + "/postgres/postmaster.pid", encoding: .utf8)
        guard let pid = text.split(separator: "\n").first.flatMap({ Int32($0) }) else {
            throw Shell.Failure(description: "no postmaster.pid in \(dataDirectory)/postgres")
        }
        return pid
    }

    /// VmHWM: the most resident memory the process ever had.
    func peakRSSMiB() -> Double {
        guard let status = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kib = line.split(separator: " ").dropFirst().first.flatMap({ Double($0) }) else { return .nan }
        return kib / 1024
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }
}
