import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import PostgresNIO
import ServiceLifecycle

/// A private PostgreSQL cluster under `$BOOKWORM_DATA_DIR/postgres`, for a user with no
/// database of their own. It listens only on a Unix socket inside its own 0700 folder, so no
/// other local user can reach it; PostgreSQL refuses to run as root, so as root it runs as the
/// `postgres` system user.
package final class EmbeddedPostgres: Service, @unchecked Sendable {
    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    package let clusterDirectory: String
    package let logger: Logger
    /// Trade durability for speed: for the throwaway test cluster only.
    let fastAndLoose: Bool
    /// Extra `postgres` command-line settings for this start (pg_ctl `-o`), e.g. a preloaded library.
    let serverOptions: String?
    private let lock = NSLock()
    /// This process's descriptor on `usersLockPath` while it uses the cluster.
    private var usersDescriptor: Int32?

    static let superuser = "bookworm"

    package init(dataDirectory: String, logger: Logger, fastAndLoose: Bool = false, serverOptions: String? = nil) {
        let base = URL(fileURLWithPath: dataDirectory, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath))
        self.clusterDirectory = base.appendingPathComponent("postgres").standardizedFileURL.path
        self.logger = logger
        self.fastAndLoose = fastAndLoose
        self.serverOptions = serverOptions
    }

    var socketPath: String { clusterDirectory + "/.s.PGSQL.5432" }
    var dataFolder: String { (clusterDirectory as NSString).deletingLastPathComponent }
    /// Locked shared by every process using the cluster, exclusively by one stopping it.
    var usersLockPath: String { dataFolder + "/postgres.users.lock" }
    /// Locked by the one process creating or starting the cluster.
    var startLockPath: String { dataFolder + "/postgres.start.lock" }
    /// Present while a Bookworm process's start of the cluster has not been undone by a stop.
    var startedMarkerPath: String { dataFolder + "/postgres.started-by-bookworm" }

    package func settings(database: String) -> DatabaseSettings {
        DatabaseSettings(endpoint: .socket(path: socketPath), username: Self.superuser, password: nil, database: database)
    }

    /// Creates the cluster on first use, starts it unless it is already running, and makes
    /// sure `database` exists. Returns how to connect to it. Several processes may share the
    /// cluster (`make run` beside a worker or an admin command): each holds a shared lock on
    /// `usersLockPath` while it uses it, which a process stopping the cluster holds alone
    /// (`stop`), so a process starting waits out one that is stopping the cluster rather than
    /// reusing a cluster about to go. Creating and starting it are one process at a time
    /// (`startLockPath`).
    package func start(database: String) async throws -> DatabaseSettings {
        guard socketPath.utf8.count < 104 else {
            throw Failure(description: "the data folder path is too long for a Unix socket: \(clusterDirectory); set BOOKWORM_DATA_DIR to a shorter path")
        }
        let bin = try Self.binaryDirectory()
        try prepareDataFolder()
        try Self.waitForLock(try usersLock(), LOCK_SH, path: usersLockPath)
        let starting = try Self.openLockFile(startLockPath)
        defer { close(starting) }
        try Self.waitForLock(starting, LOCK_EX, path: startLockPath)
        try startIfStopped(bin: bin)
        try await createDatabaseIfMissing(database)
        return settings(database: database)
    }

    private func startIfStopped(bin: String) throws {
        if !FileManager.default.fileExists(atPath: clusterDirectory + "/PG_VERSION") {
            try initialise(bin: bin)
        }
        guard try !isRunning(bin: bin) else {
            logger.info("reusing running embedded PostgreSQL", metadata: ["path": .string(clusterDirectory)])
            return
        }
        logger.info("starting embedded PostgreSQL", metadata: ["path": .string(clusterDirectory)])
        let options = serverOptions.map { ["-o", $0] } ?? []
        let started = try runCapturing(bin + "/pg_ctl", ["-D", clusterDirectory, "-l", clusterDirectory + "/server.log",
                                                         "-w", "-t", "120"] + options + ["start"])
        guard started.status == 0 else {
            let log = (try? String(contentsOfFile: clusterDirectory + "/server.log", encoding: .utf8)) ?? ""
            throw Failure(description: "PostgreSQL did not start: \(started.output.suffix(1000)) \(log.suffix(2000))")
        }
        if !FileManager.default.createFile(atPath: startedMarkerPath, contents: Data()) {
            logger.warning("cannot mark the embedded cluster as started by Bookworm: no process will stop it",
                           metadata: ["path": .string(startedMarkerPath)])
        }
    }

    private func isRunning(bin: String) throws -> Bool {
        try run(bin + "/pg_ctl", ["-D", clusterDirectory, "status"], allowFailure: true) == 0
    }

    /// Leaves the cluster's users. The last one out stops the cluster if a Bookworm process
    /// started it (`startedMarkerPath`); one an operator started is left running, as is one
    /// another process still uses (it stops it when it leaves).
    package func stop() {
        guard let users = lock.withLock({ () -> Int32? in
            defer { usersDescriptor = nil }
            return usersDescriptor
        }) else { return }
        defer { close(users) }
        guard FileManager.default.fileExists(atPath: startedMarkerPath), let bin = try? Self.binaryDirectory() else { return }
        guard flock(users, LOCK_EX | LOCK_NB) == 0 else {
            logger.info("leaving embedded PostgreSQL running for the other processes using it", metadata: ["path": .string(clusterDirectory)])
            return
        }
        logger.info("stopping embedded PostgreSQL", metadata: ["path": .string(clusterDirectory)])
        _ = try? run(bin + "/pg_ctl", ["-D", clusterDirectory, "-m", "fast", "-w", "stop"], allowFailure: true)
        try? FileManager.default.removeItem(atPath: startedMarkerPath)
    }

    package func run() async throws {
        try? await gracefulShutdown()
        stop()
    }

    /// The data folder will also hold mail: nobody else may list it, but when we are root the
    /// postgres user must be able to pass through it to its cluster.
    private func prepareDataFolder() throws {
        let manager = FileManager.default
        try manager.createDirectory(atPath: dataFolder, withIntermediateDirectories: true,
                                    attributes: [.posixPermissions: Self.isRoot ? 0o711 : 0o700])
        try manager.setAttributes([.posixPermissions: Self.isRoot ? 0o711 : 0o700], ofItemAtPath: dataFolder)
    }

    /// This process's descriptor on `usersLockPath`, opened once.
    private func usersLock() throws -> Int32 {
        if let open = lock.withLock({ usersDescriptor }) { return open }
        let descriptor = try Self.openLockFile(usersLockPath)
        lock.withLock { usersDescriptor = descriptor }
        return descriptor
    }

    /// Close-on-exec, so that no child (pg_ctl, and the postmaster it starts) inherits the lock.
    private static func openLockFile(_ path: String) throws -> Int32 {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Failure(description: "cannot open \(path): errno \(errno)") }
        return descriptor
    }

    /// `flock`, waiting for the lock (a signal does not end the wait).
    private static func waitForLock(_ descriptor: Int32, _ operation: Int32, path: String) throws {
        while flock(descriptor, operation) != 0 {
            guard errno == EINTR else { throw Failure(description: "cannot lock \(path): errno \(errno)") }
        }
    }

    private func initialise(bin: String) throws {
        let manager = FileManager.default
        try manager.createDirectory(atPath: clusterDirectory, withIntermediateDirectories: false,
                                    attributes: [.posixPermissions: 0o700])
        if Self.isRoot {
            try run("/bin/chown", ["postgres:postgres", clusterDirectory], asPostgres: false)
            guard try run("/usr/bin/test", ["-w", clusterDirectory], allowFailure: true) == 0 else {
                throw Failure(description: "the postgres system user cannot reach \(clusterDirectory): every parent folder must be searchable (chmod o+x)")
            }
        }
        logger.info("creating embedded PostgreSQL cluster", metadata: ["path": .string(clusterDirectory)])
        try run(bin + "/initdb", ["-D", clusterDirectory, "-U", Self.superuser, "-A", "trust", "-E", "UTF8",
                                  "--locale=C.UTF-8", "--no-instructions"])
        var settings = """

            # Bookworm embedded cluster: Unix socket only, inside this 0700 folder.
            listen_addresses = ''
            unix_socket_directories = '\(clusterDirectory)'
            port = 5432
            max_connections = 300
            shared_buffers = 256MB

            """
        if fastAndLoose {
            settings += "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
        }
        let confPath = clusterDirectory + "/postgresql.conf"
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: confPath))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(settings.utf8))
        try handle.close()
    }

    private func createDatabaseIfMissing(_ name: String) async throws {
        guard name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
            throw Failure(description: "invalid database name \(name)")
        }
        var quiet = logger
        quiet.logLevel = .error
        let client = settings(database: "postgres").makeClient(poolSize: 1, logger: quiet)
        try await client.whileRunning { client in
            let rows = try await client.query("SELECT count(*) FROM pg_database WHERE datname = \(name)")
            var count = 0
            for try await value in rows.decode(Int.self) { count = value }
            if count == 0 {
                try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
            }
        }
    }

    static var isRoot: Bool { geteuid() == 0 }

    /// Debian keeps the server binaries under /usr/lib/postgresql/NN/bin; prefer the newest.
    static func binaryDirectory() throws -> String {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        let sorted = versions.compactMap(Int.init).sorted(by: >)
        for version in sorted where FileManager.default.isExecutableFile(atPath: "\(root)/\(version)/bin/initdb") {
            return "\(root)/\(version)/bin"
        }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for dir in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(dir)/initdb") {
            return String(dir)
        }
        throw Failure(description: "PostgreSQL server binaries (initdb, pg_ctl) not found; run `make deps` or set DATABASE_URL")
    }

    /// Runs a command (as `postgres` when we are root), returning its exit status; its output
    /// is included in the error when it fails.
    @discardableResult
    package func run(_ executable: String, _ arguments: [String], allowFailure: Bool = false, asPostgres: Bool = true) throws -> Int32 {
        let result = try runCapturing(executable, arguments, asPostgres: asPostgres)
        if result.status != 0 && !allowFailure {
            throw Failure(description: "\((executable as NSString).lastPathComponent) failed (\(result.status)): \(result.output)")
        }
        return result.status
    }

    func runCapturing(_ executable: String, _ arguments: [String], asPostgres: Bool = true) throws -> (status: Int32, output: String) {
        let result = asPostgres && Self.isRoot
            ? try ChildProcess.run("/usr/sbin/runuser", ["-u", "postgres", "--", executable] + arguments)
            : try ChildProcess.run(executable, arguments)
        return (result.status, result.output)
    }
}
