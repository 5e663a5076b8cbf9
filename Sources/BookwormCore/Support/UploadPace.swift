import Foundation
import Synchronization

/// The bytes per second a process takes from upload bodies, all uploads together; a client sent
/// faster is held back by TCP while its upload waits. Ten 10 MiB imports sent at once over a fast
/// link otherwise arrive in half a second, and receiving and storing them fills every core: other
/// users' requests wait behind them (`BookwormBench portability`, two cores: `GET /v1/me` p50 1.2 ms
/// and p90 6.1-7.3 ms while they arrived; at 32 MiB/s, over 2.8 s, p50 0.4-0.7 ms and p90 0.6-1.9 ms
/// in nine runs). A burst of `burstBytes` passes at once, so a lone photo or a small file is not slowed.
///
/// A generic cell rate algorithm: `due` is when the bytes taken so far are paid for. A caller
/// that is cancelled while it waits keeps its reservation, which only delays the others a little.
package final class UploadPace: Sendable {
    package let bytesPerSecond: Int
    package let burstBytes: Int
    private let clock: any AppClock
    /// When the bytes taken so far are paid for, and the clock's time at the last take.
    private let state: Mutex<(due: Date, seen: Date)?> = Mutex(nil)

    /// `bytesPerSecond` 0 takes every byte at once.
    package init(bytesPerSecond: Int, burstBytes: Int = 4 << 20, clock: any AppClock) {
        self.bytesPerSecond = max(0, bytesPerSecond)
        self.burstBytes = max(0, burstBytes)
        self.clock = clock
    }

    /// Returns once `bytes` more may be taken; throws when cancelled while it waits.
    package func take(_ bytes: Int) async throws {
        guard let wait = reserve(bytes) else { return }
        try await clock.sleep(for: .nanoseconds(Int64(wait * 1e9)))
    }

    /// What one upload owes its pace: paid a quarter MiB at a time, since every wait is a timer and
    /// a wake-up of the upload's task (paying each 64 KiB read took the server's CPU from 0.2 to 0.7 s
    /// for ten 10 MiB uploads).
    package struct Tab: Sendable {
        package static let unit = 256 << 10
        let pace: UploadPace?
        var owed = 0

        package init(_ pace: UploadPace?) {
            self.pace = pace
        }

        /// Adds `bytes` read, and waits for the pace once a unit is owed.
        package mutating func add(_ bytes: Int) async throws {
            guard let pace else { return }
            owed += bytes
            guard owed >= Self.unit else { return }
            let due = owed
            owed = 0
            try await pace.take(due)
        }
    }

    /// Seconds to wait before `bytes` are taken (nil: none), their cost reserved.
    func reserve(_ bytes: Int) -> Double? {
        guard bytesPerSecond > 0, bytes > 0 else { return nil }
        let rate = Double(bytesPerSecond), tolerance = Double(burstBytes) / rate
        let now = clock.now()
        let wait = state.withLock { state -> Double in
            var due = state?.due ?? now
            // A clock set back keeps the backlog, not the jump: uploads must not wait an hour.
            if let seen = state?.seen, now < seen { due = due.addingTimeInterval(now.timeIntervalSince(seen)) }
            let next = max(due, now).addingTimeInterval(Double(bytes) / rate)
            state = (next, now)
            return next.timeIntervalSince(now) - tolerance
        }
        return wait > 0 ? wait : nil
    }
}
