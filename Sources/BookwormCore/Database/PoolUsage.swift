import Metrics
import Synchronization

/// Pooled connections in use and callers waiting for one, for `/metrics`, and how many
/// connections that a failed preparation spoilt were replaced (`FailedPreparation`). Shared by
/// every copy of a `Database` made from the same pool.
package final class PoolUsage: Sendable {
    private let counts = Mutex((waiting: 0, inUse: 0))
    private let replacements = Atomic(0)

    package init() {}

    package var snapshot: (waiting: Int, inUse: Int) { counts.withLock { $0 } }

    /// Connections closed at their lease because a failed preparation spoilt them, since the
    /// pool opened (not those closed by the deadline watch or found closed).
    package var replaced: Int { replacements.load(ordering: .relaxed) }

    /// One more connection replaced; also `bookworm_db_connections_replaced_total`, so an
    /// operator sees a pool that keeps reopening connections (a lock held past the statement
    /// timeout, or statements that keep timing out).
    func countReplacement() {
        replacements.add(1, ordering: .relaxed)
        Counter(label: Self.replacedMetric).increment()
    }

    /// Made at start-up too (`AppMetrics.bootstrap`), so that it reads 0 until the first one:
    /// a counter missing until then hides its first increase from `increase()`.
    package static let replacedMetric = "bookworm_db_connections_replaced_total"

    /// One caller's way through the pool: waiting, then leased (and released) or given up on.
    /// A caller answered at its deadline may still get its connection afterwards; the ticket
    /// counts that lease without counting the wait twice.
    final class Ticket: Sendable {
        private enum State { case waiting, leased, abandoned, released }
        private let state = Mutex(State.waiting)
        private let usage: PoolUsage

        init(_ usage: PoolUsage) {
            self.usage = usage
            usage.counts.withLock { $0.waiting += 1 }
        }

        func leased() {
            let wasWaiting = state.withLock { state -> Bool in
                defer { state = .leased }
                return state == .waiting
            }
            usage.counts.withLock {
                if wasWaiting { $0.waiting -= 1 }
                $0.inUse += 1
            }
        }

        func released() {
            state.withLock { $0 = .released }
            usage.counts.withLock { $0.inUse -= 1 }
        }

        /// The caller stopped waiting (answered, or failed before a lease).
        func done() {
            let wasWaiting = state.withLock { state -> Bool in
                guard state == .waiting else { return false }
                state = .abandoned
                return true
            }
            if wasWaiting { usage.counts.withLock { $0.waiting -= 1 } }
        }
    }
}
