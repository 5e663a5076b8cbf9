import BookwormCore
import Foundation

/// A token reused until it is `lifetime` old on the app's clock, or until the provider calls it
/// stale; a renewal that many pushes ask for at once signs once.
actor ProviderToken {
    private let lifetime: TimeInterval
    private let clock: any AppClock
    private let make: @Sendable (Date) async throws -> (token: String, lifetime: TimeInterval?)
    private var current: (token: String, until: Date)?
    private var pending: Task<(token: String, lifetime: TimeInterval?), any Error>?
    /// How many tokens were made (the benchmark prints it).
    private(set) var made = 0

    init(lifetime: TimeInterval, clock: any AppClock, make: @escaping @Sendable (Date) async throws -> (token: String, lifetime: TimeInterval?)) {
        self.lifetime = lifetime
        self.clock = clock
        self.make = make
    }

    func token() async throws -> String {
        if let current, clock.now() < current.until { return current.token }
        if let pending { return try await pending.value.token }
        let now = clock.now()
        let task = Task { [make] in try await make(now) }
        pending = task
        defer { pending = nil }
        let fresh = try await task.value
        made += 1
        current = (fresh.token, now.addingTimeInterval(fresh.lifetime ?? lifetime))
        return fresh.token
    }

    /// Drops `stale` (if it is still the current token) and returns a fresh one.
    func renew(replacing stale: String) async throws -> String {
        if current?.token == stale { current = nil }
        return try await token()
    }
}
