import Foundation
#if canImport(Glibc)
import Glibc
#endif
@testable import BookwormCore

/// The `bookworm` executable built beside the test binary.
func bookwormBinary() throws -> String {
    let here = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    for folder in [here.deletingLastPathComponent(), here.deletingLastPathComponent().deletingLastPathComponent()] {
        let candidate = folder.appendingPathComponent("bookworm").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    throw TestFailure("bookworm executable not found beside \(here.path); build with `swift build --build-tests`")
}

/// A real `bookworm serve` process on a free port, for what only a real server shows:
/// sockets, file descriptors, timeouts, a database going away under it.
final class ServerProcess: @unchecked Sendable {
    let pid: pid_t
    let port: Int
    let logPath: String

    /// Starts `bookworm serve --no-worker --migrate` on `databaseURL` (nil: the embedded cluster
    /// of its `BOOKWORM_DATA_DIR`) and waits until it answers.
    init(databaseURL: String?, port: Int? = nil, environment extra: [String: String] = [:]) async throws {
        var environment = bookwormEnvironment([
            // A small pool: a dozen of these run beside the in-process tests, and at the default
            // of 20 each they made most of the test cluster's load and connections.
            "LOG_LEVEL": "warning", "BOOKWORM_DB_POOL_SIZE": "6",
            "BOOKWORM_ARGON2_MEMORY_KIB": "8", "BOOKWORM_ARGON2_ITERATIONS": "1",
            // Stopping takes no drain unless a test asks for one (`DrainTests`).
            "BOOKWORM_SHUTDOWN_DRAIN_SECONDS": "0",
        ])
        environment["DATABASE_URL"] = databaseURL
        environment.merge(extra) { $1 }
        (pid, self.port, logPath) = try await Self.launch(port: port, environment: environment)
    }

    /// A free port can be taken by someone else (another test's outgoing connection) between
    /// finding it and the server binding it: then the server is started again on another.
    private static func launch(port fixed: Int?, environment: [String: String]) async throws -> (pid_t, Int, String) {
        for attempt in 1...3 {
            let port = try fixed ?? freePort()
            let logPath = FileManager.default.temporaryDirectory.appendingPathComponent("bookworm-server-\(UUID().uuidString).log").path
            var environment = environment
            environment["BOOKWORM_PORT"] = String(port)
            let pid = try ChildProcess.spawn(try bookwormBinary(), ["serve", "--no-worker", "--migrate"], environment: environment,
                                             outputPath: logPath)
            let up = try await eventually(within: 60, interval: .milliseconds(100)) {
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid { return true }  // exited: reported below
                return (try? rawRequest(port: port, "GET", "/health/live", timeout: 2))?.status == 200
            }
            if up, kill(pid, 0) == 0, (try? rawRequest(port: port, "GET", "/health/live", timeout: 2))?.status == 200 {
                return (pid, port, logPath)
            }
            kill(pid, SIGTERM)
            _ = ChildProcess.wait(pid)
            let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            if fixed == nil, attempt < 3, log.contains("Address already in use") { continue }
            throw TestFailure("server did not come up: \(log.suffix(2000))")
        }
        throw TestFailure("server did not come up")
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// SIGTERM, then waits for it to exit.
    func stop() {
        kill(pid, SIGTERM)
        _ = ChildProcess.wait(pid)
    }

    /// The process's open-files limit as the kernel reports it: (soft, hard).
    func openFilesLimit() throws -> (soft: String, hard: String) {
        let limits = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
        guard let line = limits.split(separator: "\n").first(where: { $0.hasPrefix("Max open files") }) else {
            throw TestFailure("no open-files line in /proc/\(pid)/limits")
        }
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        return (String(fields[3]), String(fields[4]))
    }

    /// Runs `body` with a free port for a server that must know its port before it starts (a
    /// link or a second listener carries it). Another process can take the port in between
    /// ("Address already in use", seen in CI): then `body` runs again with another.
    static func withFreePort(_ body: (Int) async throws -> Void) async throws {
        for attempt in 1...3 {
            do {
                return try await body(try freePort())
            } catch let failure as TestFailure where attempt < 3 && failure.description.contains("Address already in use") {
                continue
            }
        }
    }

    /// A port nobody listens on, chosen below the kernel's range for outgoing connections' ports:
    /// a port from that range (what binding port 0 gives) could be taken by another test's
    /// outgoing connection before the server binds it ("Address already in use", seen in CI).
    static func freePort() throws -> Int {
        let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))?
            .split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        let ephemeralStart = range?.first ?? 32_768
        if ephemeralStart > 12_000 {
            for _ in 0..<100 {
                let port = Int.random(in: 10_000..<ephemeralStart)
                if (try? bindable(port)) == port { return port }
            }
        }
        return try bindable(0)
    }

    /// Binds `port` (0: any) on 127.0.0.1 and lets it go; the port it got.
    private static func bindable(_ port: Int) throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(fd, pointer, length) == 0 else { return -1 }
                return getsockname(fd, pointer, &length)
            }
        }
        guard bound == 0 else { throw TestFailure("could not find a free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// The environment of a `bookworm` process a test starts (`serve` or `worker`), with `settings`
/// over it: a data directory of its own, and the patience of a machine the whole suite keeps
/// busy for minutes. Tests of the deadlines themselves set their own (`OutageTests`).
func bookwormEnvironment(_ settings: [String: String]) -> [String: String] {
    [
        // A fresh process opens its first connections while the whole suite loads both cores:
        // the production 2 s to get one answered a registration 503 in CI, and the production
        // 5 s statement limit can fail a worker's `sent` mark, which another worker then sends again.
        "BOOKWORM_DB_ACQUIRE_TIMEOUT_MS": "10000", "BOOKWORM_DB_STATEMENT_TIMEOUT_MS": "30000",
        // SCHED_IDLE photo and import threads get next to no CPU while the suite loads both cores.
        "BOOKWORM_BACKGROUND_IDLE": "false",
        "LOG_LEVEL": "error",
        "BOOKWORM_DATA_DIR": FileManager.default.temporaryDirectory.appendingPathComponent("bookworm-\(UUID().uuidString)").path,
        "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
    ].merging(settings) { $1 }
}
