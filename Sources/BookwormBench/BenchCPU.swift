import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// CPU time used so far, in seconds, by the three parties of a throughput round: the server
/// under test (all its threads), PostgreSQL (the postmaster, its live children, and the
/// children it has reaped: pgbench's backends end with its run) and this process's finished
/// children (wrk or pgbench). Taken before and after a run, it says where a request's CPU went,
/// which a rate alone cannot: on a machine where all three share the cores, the HTTP side's gap
/// is the server's own CPU and whatever PostgreSQL's work costs more beside it.
struct CPUSample {
    var server = 0.0
    var database = 0.0
    var tools = 0.0

    static func take(server: Int32, postmaster: Int32) -> CPUSample {
        var usage = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &usage)
        let tools = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        let database = ProcessCPU.children(of: postmaster).reduce(ProcessCPU.seconds(postmaster, reaped: true)) {
            $0 + ProcessCPU.seconds($1, reaped: false)
        }
        return CPUSample(server: ProcessCPU.seconds(server, reaped: false), database: database, tools: tools)
    }

    /// Milliseconds of each party's CPU per request (or transaction) between `earlier` and this.
    func perRequest(since earlier: CPUSample, requests: Double) -> CPUShare {
        let scale = 1000 / max(requests, 1)
        return CPUShare(server: (server - earlier.server) * scale, database: (database - earlier.database) * scale,
                        tools: (tools - earlier.tools) * scale)
    }
}

/// Milliseconds of CPU per request of the server, PostgreSQL and the load tool.
struct CPUShare {
    var server: Double
    var database: Double
    var tools: Double
}

/// The processes whose CPU a round counts: `/proc/<pid>/stat`.
enum ProcessCPU {
    /// User and system time of `pid` (every thread), with its reaped children's when `reaped`;
    /// 0 for a process gone meanwhile.
    static func seconds(_ pid: Int32, reaped: Bool) -> Double {
        guard let fields = fields(pid), fields.count > 14 else { return 0 }
        // After the name: state (0), …, utime (11), stime (12), cutime (13), cstime (14).
        let own = (Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)
        let children = reaped ? (Double(fields[13]) ?? 0) + (Double(fields[14]) ?? 0) : 0
        return (own + children) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    static func children(of parent: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> Int32? in
            guard let pid = Int32(entry), let fields = fields(pid), fields.count > 1 else { return nil }
            return Int32(fields[1]) == parent ? pid : nil
        }
    }

    /// The fields of `/proc/<pid>/stat` after the process's name (which may hold spaces).
    private static func fields(_ pid: Int32) -> [Substring]? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        return stat[stat.index(after: close)...].split(separator: " ")
    }
}
