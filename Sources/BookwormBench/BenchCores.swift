import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// PostgreSQL on the first half of the machine's CPUs; the server under test, this benchmark
/// and the load tools it starts on the other half. On a shared machine the HTTP side runs the
/// server and wrk on the very cores PostgreSQL needs, where pgbench's side leaves them to
/// PostgreSQL, so the shared-core ratio measures how much CPU the server takes from the
/// database as much as how fast it is. Split, each side's PostgreSQL has the same CPUs, and the
/// ratio says whether the HTTP layer keeps up with the database it waits on: where a
/// deployment's API processes run beside the database, not on its cores.
struct CoreSplit {
    let all: String
    let database: String
    let others: String

    /// Nil with fewer than two CPUs or without `taskset` (util-linux).
    static func ofThisMachine() -> CoreSplit? {
        let count = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        guard count >= 2, Shell.which("taskset") != nil else { return nil }
        let half = count / 2
        return CoreSplit(all: "0-\(count - 1)", database: half == 1 ? "0" : "0-\(half - 1)",
                         others: half == count - 1 ? "\(half)" : "\(half)-\(count - 1)")
    }

    var description: String { "PostgreSQL on CPU \(database), the server and load tools on CPU \(others)" }

    /// Runs `body` split, and puts every process back on all CPUs after it, whatever it throws.
    /// Nil, after a line saying why, when the processes cannot be moved (`taskset` refused): the
    /// shared figures stand without the split ones.
    func whileSplit<T>(postmaster: Int32, server: Int32, _ body: () throws -> T) throws -> T? {
        defer { _ = assign(postmaster: postmaster, server: server, database: all, others: all) }
        guard assign(postmaster: postmaster, server: server, database: database, others: others) else {
            print("split CPUs skipped: taskset could not move the server, PostgreSQL or this benchmark")
            return nil
        }
        return try body()
    }

    /// The postmaster and its children (backends forked later inherit the postmaster's CPUs),
    /// then the server's threads and this process's (whose children, wrk and pgbench, inherit
    /// them). False when the postmaster, the server or this process could not be moved.
    private func assign(postmaster: Int32, server: Int32, database: String, others: String) -> Bool {
        guard let taskset = Shell.which("taskset") else { return false }
        // A backend may exit meanwhile.
        for pid in ProcessCPU.children(of: postmaster) { _ = try? Shell.run(taskset, ["-a", "-p", "-c", database, "\(pid)"]) }
        let moved = [(postmaster, database), (server, others), (getpid(), others)].map { pid, cpus in
            (try? Shell.run(taskset, ["-a", "-p", "-c", cpus, "\(pid)"])) != nil
        }
        return !moved.contains(false)
    }
}
