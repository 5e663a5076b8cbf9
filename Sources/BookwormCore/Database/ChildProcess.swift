import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Runs a command to completion with `posix_spawn` + `waitpid`, its output going to a
/// temporary file. Foundation's `Process` is avoided here on purpose: `pg_ctl start` leaves a
/// daemon that inherits the child's descriptors, and `Process` was seen to never notice the
/// child's exit in that case. It also hands the child the signal mask of whichever thread
/// spawned it (Dispatch and the concurrency pool block most signals), which left pgbench deaf to
/// its own SIGALRM: here the child starts with no signal blocked and default dispositions.
package enum ChildProcess {
    package struct Result: Sendable {
        package let status: Int32
        package let output: String
    }

    package static func run(_ executable: String, _ arguments: [String]) throws -> Result {
        let outputPath = FileManager.default.temporaryDirectory
            .appendingPathComponent("bookworm-\(getpid())-\(UUID().uuidString).out").path
        defer { unlink(outputPath) }
        let pid = try spawn(executable, arguments, outputPath: outputPath)
        let status = wait(pid)
        let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        return Result(status: status, output: output)
    }

    /// Starts `executable` in the background, standard output and error going to `outputPath`
    /// (or nowhere), and returns its pid. `environment` nil: this process's environment.
    package static func spawn(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                             outputPath: String = "/dev/null") throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        closeInheritedDescriptors(&actions)

        let argv = ([executable] + arguments).map { strdup($0) }
        defer { argv.forEach { free($0) } }
        let variables = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") }
        defer { variables.forEach { free($0) } }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var pid = pid_t()
        let args = argv + [nil]
        let env = variables + [nil]
        let spawned = posix_spawnp(&pid, executable, &actions, &attributes, args, env)
        guard spawned == 0 else {
            throw EmbeddedPostgres.Failure(description: "could not start \(executable): \(String(cString: strerror(spawned)))")
        }
        return pid
    }

    /// Every descriptor from 3 up is closed in the child. Sockets opened without `CLOEXEC` (by
    /// this process or a library in it) would otherwise pass to the child and, through
    /// `pg_ctl`, to a PostgreSQL that lives on: one that inherited about 960 of them refused to
    /// start ("insufficient file descriptors", since it counts its own headroom from the
    /// highest descriptor open). glibc has the action since 2.34 but does not export it to
    /// Swift, so it is looked up by name; where it is missing, children inherit as before.
    private static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = closeFromSymbol else { return }
        _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
    }

    nonisolated(unsafe) private static let closeFromSymbol: UnsafeMutableRawPointer? = {
        let handle = dlopen(nil, RTLD_NOW)
        return dlsym(handle, "posix_spawn_file_actions_addclosefrom_np")
    }()

    /// Waits for `pid` to end; its exit code, or 128 + the signal that ended it.
    @discardableResult
    package static func wait(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        // WIFEXITED / WEXITSTATUS by hand: the C macros are not imported.
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}
