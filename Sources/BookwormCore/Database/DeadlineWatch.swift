import Foundation
import PostgresNIO
import Synchronization

/// One thread that watches the deadlines of every database call in the process.
///
/// A call used to start a timer task of its own (`Task.sleep`), which cost each statement a
/// task, a Dispatch timer armed and disarmed, and the wake-ups of cancelling it: two to five
/// of the server's thread switches per nearby request under load (19–21 then, 15–18 now). Here a call only adds an entry to a table and takes
/// it out again; the thread looks at the table every `tick`, so a deadline fires up to a tick
/// late, which is nothing beside deadlines of seconds. Being a thread of its own, it fires even
/// when every task thread is busy.
package final class DeadlineWatch: Sendable {
    package static let shared = DeadlineWatch(tick: .milliseconds(50))

    private struct Entry {
        /// Read under the table's lock: only atomics, never a lock of its own.
        let isDue: @Sendable (ContinuousClock.Instant) -> Bool
        let fire: @Sendable () -> Void
    }

    private struct Table {
        var next: UInt64 = 0
        var entries: [UInt64: Entry] = [:]
    }

    private let table = Mutex(Table())

    /// `tick` nil: nothing sweeps but a caller of `sweep` (the tests).
    init(tick: Duration?) {
        guard let tick else { return }
        let microseconds = UInt32(tick.components.seconds * 1_000_000 + tick.components.attoseconds / 1_000_000_000_000)
        let thread = Thread { [self] in
            while true {
                usleep(microseconds)
                sweep(now: .now)
            }
        }
        thread.name = "bookworm-deadlines"
        thread.start()
    }

    /// Watches a call until `remove`: once `isDue` holds, `fire` runs once, on the watch's thread.
    package func add(isDue: @escaping @Sendable (ContinuousClock.Instant) -> Bool, fire: @escaping @Sendable () -> Void) -> UInt64 {
        table.withLock { table in
            table.next &+= 1
            table.entries[table.next] = Entry(isDue: isDue, fire: fire)
            return table.next
        }
    }

    package func remove(_ id: UInt64) {
        _ = table.withLock { $0.entries.removeValue(forKey: id) }
    }

    var watching: Int { table.withLock { $0.entries.count } }

    /// Takes the due entries out under the lock and fires them after it, since firing answers
    /// the caller, which removes its entry.
    func sweep(now: ContinuousClock.Instant) {
        let due: [Entry] = table.withLock { table in
            let ids = table.entries.compactMap { id, entry in entry.isDue(now) ? id : nil }
            return ids.compactMap { table.entries.removeValue(forKey: $0) }
        }
        due.forEach { $0.fire() }
    }
}

/// One answer for a caller from whichever comes first: the work, the deadline or cancellation.
final class Race<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var early: Result<T, any Error>?
        var work: Task<Void, any Error>?
        var watch: UInt64?
        var done = false
    }
    private let state = Mutex(State())

    func start(_ continuation: CheckedContinuation<T, any Error>, work: Task<Void, any Error>, watch: UInt64) {
        let early: Result<T, any Error>? = state.withLock { state in
            state.work = work
            state.watch = watch
            guard let early = state.early else {
                state.continuation = continuation
                return nil
            }
            return early
        }
        if let early {
            work.cancel()
            DeadlineWatch.shared.remove(watch)
            continuation.resume(with: early)
        }
    }

    func finish(_ result: Result<T, any Error>) {
        let (continuation, work, watch) = state.withLock { state -> (CheckedContinuation<T, any Error>?, Task<Void, any Error>?, UInt64?) in
            guard !state.done else { return (nil, nil, nil) }
            state.done = true
            guard let continuation = state.continuation else {
                state.early = result
                return (nil, nil, nil)
            }
            state.continuation = nil
            return (continuation, state.work, state.watch)
        }
        work?.cancel()
        if let watch { DeadlineWatch.shared.remove(watch) }
        continuation?.resume(with: result)
    }
}

/// The connection a call leased, once it has one; read by the deadline watch (atomics only:
/// the reference, and the channel's `isActive`).
final class LeasedConnection: Sendable {
    private let reference = AtomicLazyReference<PostgresConnection>()
    func set(_ connection: PostgresConnection) { _ = reference.storeIfNil(connection) }
    var connection: PostgresConnection? { reference.load() }
    /// What the caller hears when the watch fires.
    var failure: any Error {
        guard let connection else { return DatabaseDeadlineExceeded(leased: false) }
        return connection.isClosed ? DatabaseConnectionClosed() : DatabaseDeadlineExceeded(leased: true)
    }
}

/// A flag one task sets and others read without waiting (a lease taken, a record written).
package final class OnceFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    package init() {}
    package func set() { flag.store(true, ordering: .releasing) }
    package var isSet: Bool { flag.load(ordering: .acquiring) }
}
