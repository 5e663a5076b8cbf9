import CSched
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The server's threads ask Linux's scheduler (EEVDF, kernel 6.12 and later) for a short slice.
/// A thread that wakes with a shorter slice than the one running on its core takes the core at
/// once; with the kernel's default (1.4 ms here) it waited for the running thread's slice to end,
/// up to the next tick (4 ms at 250 Hz). On a machine shared with PostgreSQL, a request's thread
/// waited that long behind a backend busy with an import: ten imports at once raised another
/// user's `GET /v1/me` p99 about fourfold (`BookwormBench portability`). A short slice buys no
/// more CPU, only an earlier turn; an older kernel ignores it. Unprivileged.
package enum ThreadSlices {
    /// Sets `microseconds` (100 to 100,000) on every thread of the process that runs in
    /// SCHED_OTHER; threads made later inherit it from the thread that makes them. Returns how
    /// many threads took it.
    @discardableResult
    package static func shorten(to microseconds: Int) -> Int {
        #if os(Linux)
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap(Int32.init).filter { bookworm_set_slice($0, UInt64(microseconds) * 1000) == 0 }.count
        #else
        return 0
        #endif
    }
}
