import Foundation

/// The time the rules run on: session expiry, throttle windows, outbox backoff and leases,
/// housekeeping and every later expiry job, an account's age (it stamps new users), a book's
/// latest publication year and a mail's date. Stores bind `now()` into their SQL instead of
/// asking PostgreSQL, so a test moves this clock instead of sleeping.
package protocol AppClock: Sendable {
    func now() -> Date
    /// Returns once `duration` of this clock's time has passed; throws when cancelled.
    func sleep(for duration: Duration) async throws
}

/// The real thing: wall time, and sleeping on the system's monotonic clock.
package struct SystemClock: AppClock {
    package init() {}
    package func now() -> Date { Date() }
    package func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }
}
