import Synchronization

/// What the listener heard and not yet handled. Past `limit` queued notifications the rest are
/// dropped and every stream is told to pull (`resync`), so a burst costs bounded memory.
final class LiveInbox: Sendable {
    struct Batch {
        var notifications: [(String, String)] = []
        var resync = false
    }

    private struct State {
        var batch = Batch()
        /// Set by the retry timer: the next wait returns even with nothing queued.
        var kicked = false
        /// How many of `batch.notifications` are taken already.
        var head = 0
        var waiter: CheckedContinuation<Void, Never>?
    }

    static let limit = 100_000
    static let batchLimit = 256
    private let state = Mutex(State())

    func add(_ channel: String, _ payload: String) {
        wake { state in
            if state.batch.notifications.count - state.head < Self.limit {
                state.batch.notifications.append((channel, payload))
            } else {
                state.batch.resync = true
            }
        }
    }

    /// A listener that starts hearing may have missed anything before (a stream can open before
    /// the first `LISTEN`, or while it reconnects): every stream pulls. The old connection's
    /// hints (`h`) still queued go: its database may not be the new one's (a restore, or a
    /// failover that lost transactions and hands their ids out again).
    func listening(_ listening: Bool) {
        guard listening else { return }
        wake { state in
            state.batch.resync = true
            state.batch.notifications = state.batch.notifications[state.head...].filter { !$0.1.hasPrefix("h ") }
            state.head = 0
        }
    }

    func missedSome() {
        wake { $0.batch.resync = true }
    }

    private func wake(_ change: (inout State) -> Void) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            change(&state)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// The next batch, once there is one; with `retryAfter`, after that long at most even if empty.
    func next(retryAfter: Duration?) async -> Batch {
        let timer = retryAfter.map { delay in
            Task { [weak self] in
                // Cancelled (a batch came first): no kick, or the next wait would end at once.
                guard (try? await Task.sleep(for: delay)) != nil else { return }
                self?.wake { $0.kicked = true }
            }
        }
        defer { timer?.cancel() }
        await waitForAny()
        return state.withLock { state in
            state.kicked = false
            return Self.take(&state)
        }
    }

    /// What is queued now, if anything, without waiting.
    func takeQueued() -> Batch? {
        state.withLock { state in
            state.batch.notifications.count > state.head || state.batch.resync ? Self.take(&state) : nil
        }
    }

    /// At most `batchLimit` at a time, so that what one batch writes to a stream stays well
    /// within its budget however far behind its client is.
    private static func take(_ state: inout State) -> Batch {
        let queued = state.batch.notifications
        guard queued.count - state.head > Self.batchLimit else {
            defer {
                state.batch = Batch()
                state.head = 0
            }
            return Batch(notifications: Array(queued[state.head...]), resync: state.batch.resync)
        }
        let taken = Batch(notifications: Array(queued[state.head..<(state.head + Self.batchLimit)]), resync: state.batch.resync)
        state.head += Self.batchLimit
        if state.head >= 4096 {
            state.batch.notifications.removeFirst(state.head)
            state.head = 0
        }
        state.batch.resync = false
        return taken
    }

    private func waitForAny() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> Bool in
                    if state.batch.notifications.count > state.head || state.batch.resync || state.kicked || Task.isCancelled { return true }
                    state.waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            wake { $0.kicked = true }
        }
    }
}
