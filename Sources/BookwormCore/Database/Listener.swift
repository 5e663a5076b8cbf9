import Foundation
import Logging
import PostgresNIO

extension Database {
    /// Holds one connection on `LISTEN channel` until the task is cancelled, and takes another a
    /// second after it drops. `listening` hears `true` once each `LISTEN` has taken effect and
    /// `false` when that connection ends (a caller that trusts what it keeps only while it hears
    /// every notification, `SessionCache`); `notified` gets each payload. On the pool without deadlines:
    /// this lease lasts as long as the caller, past any deadline.
    package func listen(_ channel: String, logger: Logger, listening: @escaping @Sendable (Bool) -> Void = { _ in },
                        notified: @escaping @Sendable (String) async -> Void) async {
        await listen([channel], logger: logger, listening: listening) { _, payload in await notified(payload) }
    }

    /// The same for several channels on one connection: `notified` gets each channel and payload.
    package func listen(_ channels: [String], logger: Logger, listening: @escaping @Sendable (Bool) -> Void = { _ in },
                        notified: @escaping @Sendable (String, String) async -> Void) async {
        while !Task.isCancelled {
            do {
                // Only an open connection (`openConnection`): a `LISTEN` written to one the pool
                // hands out already closed is never answered, and `listening(true)` never comes.
                try await openConnection { connection in
                    var sequences: [(String, PostgresNotificationSequence)] = []
                    for channel in channels { sequences.append((channel, try await connection.listen(channel))) }
                    listening(true)
                    defer { listening(false) }
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for (channel, notifications) in sequences {
                            group.addTask { for try await notification in notifications { await notified(channel, notification.payload) } }
                        }
                        // The first sequence to end (its connection closed) ends them all.
                        try await group.next()
                        group.cancelAll()
                    }
                }
            } catch {
                if Task.isCancelled { return }
                logger.debug("listener reconnecting", metadata: ["channels": .string(channels.joined(separator: ",")), "error": .string("\(error)")])
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }
}

extension Database {
    /// Signals each of `wakes` on each notification on `channel`, and once each time the
    /// `LISTEN` takes effect: what was committed while no one listened (before start-up, during
    /// a reconnect) is looked at then, not at the next poll, which on a test's manual clock never comes.
    package func listen(_ channel: String, waking wakes: [WakeSignal], logger: Logger) async {
        await listen(channel, logger: logger, listening: { listening in
            if listening { Task { for wake in wakes { await wake.signal() } } }
        }) { _ in for wake in wakes { await wake.signal() } }
    }
}
