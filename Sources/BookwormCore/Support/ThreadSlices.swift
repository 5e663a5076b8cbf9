import CSched
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The server's threads ask Linux's scheduler (EEVDF, kernel 6.12 and later) for a short slice.
/// A thread that wakes with a shorter slice than the one running on its core takes the core at
/// once; with the kernel's default (1.4 ms on two cores) it waited for the running thread's slice
/// to end, up to the next tick (4 ms at 250 Hz). On a machine shared with PostgreSQL, a request's
/// thread waited that long behind a backend busy with an import (`BookwormBench portability`).
/// A short slice buys no more CPU, only an earlier turn; an older kernel ignores it.
/// Unprivileged. Threads that must not crowd requests (`LowPriorityThread`) give it back.
package enum ThreadSlices {
    /// The kernel's bounds on a requested slice.
    package static let microseconds = 100...100_000

    /// Sets `microseconds` on every thread of the process that runs in SCHED_OTHER, listing the
    /// threads again until a pass finds no new one; threads made later inherit it from the thread
    /// that makes them. How many threads took it, and the errno of the last refusal.
    package static func shorten(to microseconds: Int) -> (set: Int, refused: Int32?) {
        #if os(Linux)
        var seen = Set<Int32>(), set = 0, refused: Int32?
        for _ in 0..<5 {
            let tasks = Set(((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []).compactMap(Int32.init))
            let new = tasks.subtracting(seen)
            if new.isEmpty { break }
            for tid in new {
                switch bookworm_set_slice(tid, UInt64(microseconds) * 1000) {
                case 1: set += 1
                case 0: break
                default: refused = errno
                }
            }
            seen.formUnion(new)
        }
        return (set, refused)
        #else
        return (0, nil)
        #endif
    }

    /// The calling thread goes back to the kernel's default slice.
    package static func restoreDefault() {
        _ = bookworm_set_slice(0, 0)
    }

    /// The slice (ns) thread `tid` runs with (0: the calling thread); nil where the kernel does not say.
    package static func slice(ofThread tid: Int32 = 0) -> Int? {
        let slice = bookworm_slice(tid)
        return slice > 0 ? Int(slice) : nil
    }
}
