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
    /// An ordinary one beside it, for a process told not to use `SCHED_IDLE`: a thread cannot
    /// leave `SCHED_IDLE` without `CAP_SYS_NICE`, so the two are never the same thread.
    private static let idleThread = startedPool()
    private static let ordinaryThread = startedPool()

    private static func startedPool() -> NIOThreadPool {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        return pool
    }

    /// `work` on the background thread, in `SCHED_IDLE` as photos are (`idleOnce`) unless `idle`
    /// is false: it waits whenever a request's thread wants the core. A 10,000-line import beside
    /// a steady stream of `GET /v1/copies` still takes 4-5 s (`BookwormBench portability`).
    package static func background<T: Sendable>(idle: Bool, _ work: @escaping @Sendable () throws -> T) async throws -> T {
        guard idle else { return try await ordinaryThread.runIfActive(work) }
        return try await idleThread.runIfActive {
            idleOnce()
            return try work()
        }
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
