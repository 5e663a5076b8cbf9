import Synchronization

/// A one-way gate for one waiter: `wait` returns once `open` has been called (at once if it
/// already was). A held connection waits on one until its transaction is done with it; a live
/// stream's response until the stream ends.
final class Gate: Sendable {
    private let state = Mutex<(waiter: CheckedContinuation<Void, Never>?, open: Bool)>((nil, false))

    func wait() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiter = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }

    func open() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.open = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }
}
