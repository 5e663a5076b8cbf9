import Foundation
import Synchronization

/// The bytes per second a process takes from upload bodies, all uploads together; a client sent
/// faster is held back by TCP while its upload waits. Ten 9 MiB imports sent at once over a fast
/// link otherwise arrive in half a second, and receiving and storing them fills every core: other
/// users' requests wait behind them (`BookwormBench portability`, two cores: `GET /v1/me` p50 1.2 ms
/// and p90 6.1-7.3 ms while they arrived; at 32 MiB/s, over 2.8 s, p50 0.4-0.7 ms and p90 0.6-1.9 ms
/// in nine runs). A burst of `burstBytes` passes at once, so a lone photo or a small file is not slowed.
///
/// A generic cell rate algorithm: `due` is when the bytes taken so far are paid for. An upload
/// that would wait longer than `maxWait` is refused (503, `Retry-After`) rather than queued, since
/// the server closes a connection that sends nothing for its idle timeout. A client that goes
/// away while its upload waits keeps its reservation until the wait ends (Hummingbird does not
/// cancel a handler on a disconnect); the next read then fails.
package final class UploadPace: Sendable {
    package let bytesPerSecond: Int
    package let burstBytes: Int
    package let maxWait: Double
    private let clock: any AppClock
    /// When the bytes taken so far are paid for, and the clock's time at the last take.
    private let state: Mutex<(due: Date, seen: Date)?> = Mutex(nil)

    /// `bytesPerSecond` 0 takes every byte at once.
    package init(bytesPerSecond: Int, burstBytes: Int = 4 << 20, maxWait: Double = 15, clock: any AppClock) {
        self.bytesPerSecond = max(0, bytesPerSecond)
        self.burstBytes = max(0, burstBytes)
        self.maxWait = max(0, maxWait)
        self.clock = clock
    }

    /// Returns once `bytes` more may be taken; throws `overloaded` when that would be longer than
    /// `maxWait`, and when cancelled while it waits.
    package func take(_ bytes: Int) async throws {
        switch reserve(bytes) {
        case .now: return
        case .after(let seconds): try await clock.sleep(for: .nanoseconds(Int64(seconds * 1e9)))
        case .refused(let seconds): throw AppError.overloaded(retryAfterSeconds: max(1, Int(seconds.rounded(.up))))
        }
    }

    enum Turn: Equatable {
        case now
        case after(Double)
        /// Not reserved: the queue is this many seconds long past `maxWait`.
        case refused(Double)
    }

    /// When `bytes` may be taken, their cost reserved unless refused.
    func reserve(_ bytes: Int) -> Turn {
        guard bytesPerSecond > 0, bytes > 0 else { return .now }
        let rate = Double(bytesPerSecond), tolerance = Double(burstBytes) / rate
        return state.withLock { state -> Turn in
            // Read under the lock: two takes that read the clock outside it could see it go back.
            let now = clock.now()
            var due = state?.due ?? now
            // A clock set back keeps the backlog, not the jump: uploads must not wait an hour.
            if let seen = state?.seen, now < seen { due = due.addingTimeInterval(now.timeIntervalSince(seen)) }
            let next = max(due, now).addingTimeInterval(Double(bytes) / rate)
            let wait = next.timeIntervalSince(now) - tolerance
            guard wait <= maxWait else {
                state = (due, now)
                return .refused(wait - maxWait)
            }
            state = (next, now)
            return wait > 0 ? .after(wait) : .now
        }
    }

    /// What one upload owes its pace: paid a quarter MiB at a time, since every wait is a timer and
    /// a wake-up of the upload's task (paying each 64 KiB read took the server's CPU from 0.2 to 0.7 s
    /// for ten 9 MiB uploads), and the rest once the body has ended (`settle`).
    package struct Tab: Sendable {
        package static let unit = 256 << 10
        let pace: UploadPace?
        var owed = 0

        package init(_ pace: UploadPace?) {
            self.pace = pace
        }

        /// Adds `bytes` read, and waits for the pace once a unit is owed.
        package mutating func add(_ bytes: Int) async throws {
            guard pace != nil else { return }
            owed += bytes
            guard owed >= Self.unit else { return }
            try await settle()
        }

        /// Pays what is owed: at the end of a body, so that small uploads count too.
        package mutating func settle() async throws {
            guard let pace, owed > 0 else { return }
            let due = owed
            owed = 0
            try await pace.take(due)
        }
    }
}
