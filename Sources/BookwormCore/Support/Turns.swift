import Synchronization

/// At most `limit` callers run at once; the others wait their turn, first come first served.
/// Unlike `Admission`, no one is shed: it is for work whose callers can wait (an upload's next
/// part, its client held back by TCP meanwhile) but which crowds the cores when many run at once.
/// A caller cancelled while it waits leaves the line with `CancellationError`.
package final class Turns: Sendable {
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var free: Int
        var waiting: [Waiter] = []
    }

    private let state: Mutex<State>
    private let ids = Atomic<UInt64>(0)

    package init(_ limit: Int) {
        state = Mutex(State(free: max(1, limit)))
    }

    /// Callers waiting for a turn at this moment.
    package var waiting: Int { state.withLock { $0.waiting.count } }

    package func run<T>(_ work: () async throws -> T) async throws -> T {
        try await take()
        defer { give() }
        return try await work()
    }

    private func take() async throws {
        let id = ids.add(1, ordering: .relaxed).newValue
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // One lock for the check and the queueing, so a turn given back in between is not lost.
                let granted: Bool? = state.withLock { state in
                    if Task.isCancelled { return false }
                    if state.free > 0 && state.waiting.isEmpty {
                        state.free -= 1
                        return true
                    }
                    state.waiting.append(Waiter(id: id, continuation: continuation))
                    return nil
                }
                switch granted {
                case true?: continuation.resume()
                case false?: continuation.resume(throwing: CancellationError())
                case nil: break
                }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                state.waiting.firstIndex { $0.id == id }.map { state.waiting.remove(at: $0) }
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }

    /// The turn goes to the first in line, or back to the pool.
    private func give() {
        let next = state.withLock { state -> Waiter? in
            guard !state.waiting.isEmpty else {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.continuation.resume()
    }
}
