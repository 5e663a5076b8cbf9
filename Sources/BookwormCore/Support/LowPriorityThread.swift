import Foundation
import NIOPosix
#if canImport(Glibc)
import Glibc
#endif

/// Threads for long computations (password hashing, reading an import) yield to the event loops
/// and the database: a hash or an import that waits a few ms longer is invisible, a
/// `GET /v1/me` that does is not.
package enum LowPriorityThread {
    /// Lowers the calling thread's priority, once per thread.
    package static func lowerOnce() {
        #if os(Linux)
        if pthread_getspecific(key.value) == nil {
            // On Linux the nice value is per thread, and `who == 0` names the calling thread.
            _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
            pthread_setspecific(key.value, UnsafeRawPointer(bitPattern: 1))
        }
        #endif
    }

    /// Puts the calling thread in `SCHED_IDLE`: it runs only on a core nothing else wants, and
    /// any other thread that wakes takes the core from it at once. Nice 19 was not enough for
    /// photos: with two photo threads busy, Linux's scheduler (EEVDF) let them finish their slice
    /// first, and other users' requests waited up to a few ms (`BookwormBench photos`).
    package static func idleOnce() {
        #if os(Linux)
        if pthread_getspecific(key.value) == nil {
            var parameters = sched_param()
            // SCHED_IDLE (5): glibc declares it only under _GNU_SOURCE. Zero names the calling thread.
            _ = sched_setscheduler(0, 5, &parameters)
            pthread_setspecific(key.value, UnsafeRawPointer(bitPattern: 1))
        }
        #endif
    }

    /// One thread for background work (an import read, an old upload made anew), for the
    /// process's lifetime: work run here runs one at a time, so its memory is one piece of work's.
    private static let single: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        return pool
    }()

    /// `work` on the background thread, in `SCHED_IDLE` as photos are (`idleOnce`) unless `idle`
    /// is false: it waits whenever a request's thread wants the core. A 10,000-line import beside
    /// a steady stream of `GET /v1/copies` still takes 4-5 s (`BookwormBench portability`). The
    /// policy is set for each piece of work, since callers of the one thread may differ.
    package static func background<T: Sendable>(idle: Bool, _ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await single.runIfActive {
            setPolicy(idle: idle)
            return try work()
        }
    }

    private static func setPolicy(idle: Bool) {
        #if os(Linux)
        var parameters = sched_param()
        // SCHED_IDLE is 5, SCHED_OTHER 0 (see idleOnce).
        _ = sched_setscheduler(0, idle ? 5 : 0, &parameters)
        #endif
    }

    #if os(Linux)
    private final class Key: Sendable {
        let value: pthread_key_t
        init() {
            var key = pthread_key_t()
            pthread_key_create(&key, nil)
            value = key
        }
    }
    private static let key = Key()
    #endif
}
