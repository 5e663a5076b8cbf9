import BookwormCore
import Foundation
import NIOConcurrencyHelpers

/// A clock that moves only when a test says so. Sleepers wake as soon as `advance` passes
/// their deadline, so a test about expiry, backoff or leases never waits for real time.
final class ManualClock: AppClock, @unchecked Sendable {
    private struct Sleeper {
        let deadline: Date
        let continuation: CheckedContinuation<Void, any Error>
    }

    private let state: NIOLockedValueBox<(now: Date, sleepers: [UUID: Sleeper])>

    init(start: Date = Date()) {
        state = NIOLockedValueBox((start, [:]))
    }

    func now() -> Date { state.withLockedValue { $0.now } }

    func advance(by seconds: TimeInterval) {
        let due: [Sleeper] = state.withLockedValue { state in
            state.now = state.now.addingTimeInterval(seconds)
            let now = state.now
            let ready = state.sleepers.filter { $0.value.deadline <= now }
            for key in ready.keys { state.sleepers[key] = nil }
            return Array(ready.values)
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Moves the clock up to `date` (the real time by default) if it is behind it: for what
    /// another process (the `bookworm` command line) stamped with its own, real clock.
    func catchUp(to date: Date = Date()) {
        advance(by: max(0, date.timeIntervalSince(now())))
    }

    /// How many tasks are asleep on this clock now.
    var sleeperCount: Int { state.withLockedValue { $0.sleepers.count } }

    /// How long until the first sleeper wakes, if one sleeps.
    var nextWake: TimeInterval? {
        state.withLockedValue { state in state.sleepers.values.map { $0.deadline.timeIntervalSince(state.now) }.min() }
    }

    func sleep(for duration: Duration) async throws {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        let id = UUID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow: Bool = state.withLockedValue { state in
                    if Task.isCancelled || seconds <= 0 { return true }
                    state.sleepers[id] = Sleeper(deadline: state.now.addingTimeInterval(seconds), continuation: continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let sleeper = state.withLockedValue { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
        try Task.checkCancellation()
    }
}

/// Waits for something a real process (or a server's background task) does, checking every
/// `interval` until `deadline` seconds pass. For conditions only another process can make true;
/// anything on our own clock is advanced instead.
func eventually(within deadline: TimeInterval = 30, interval: Duration = .milliseconds(50),
                _ condition: () async throws -> Bool) async throws -> Bool {
    let end = Date().addingTimeInterval(deadline)
    while Date() < end {
        if try await condition() { return true }
        try await Task.sleep(for: interval)
    }
    return try await condition()
}

/// Runs blocking work (child processes, loops over blocking sockets) on a thread of its own, so
/// it never holds one of the few cooperative threads every other test in the process needs.
func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}

extension ManualClock {
    /// Moves the clock `step` at a time whenever something sleeps on it, until `done`; the time
    /// moved. Polled with pauses: work on SCHED_IDLE threads (photos) would starve under a spin.
    /// Throws when a minute passes with nothing asleep and nothing done, or past `limit` seconds of
    /// the clock: bounded here rather than by a test's time limit, which also counts the time a
    /// test waits for its turn in a full run.
    func advanceWhileAsleep(step: TimeInterval, limit: TimeInterval = 600, until done: () -> Bool) async throws -> TimeInterval {
        var moved = 0.0
        while !done() {
            guard moved <= limit, try await eventually(within: 60, interval: .milliseconds(5), { done() || sleeperCount > 0 }) else {
                throw Stalled(moved: moved)
            }
            guard sleeperCount > 0 else { continue }
            advance(by: step)
            moved += step
        }
        return moved
    }
}

extension ManualClock {
    /// Wakes each sleeper in turn, moving the clock to its deadline, until `done`; how many it
    /// woke. Throws `Stalled` when a minute passes with nothing asleep and nothing done.
    func wakeEachSleeper(until done: () async throws -> Bool) async throws -> Int {
        var woken = 0
        while try await !done() {
            guard try await eventually(within: 60, interval: .milliseconds(5), { try await done() || sleeperCount > 0 }) else {
                throw Stalled(moved: 0)
            }
            guard let wake = nextWake else { continue }
            advance(by: wake)
            woken += 1
        }
        return woken
    }
}

struct Stalled: Error, CustomStringConvertible {
    let moved: TimeInterval
    var description: String { "the work was not done after moving the clock \(moved) s (or nothing slept on it for a minute)" }
}
