import Synchronization

/// A job runner's one turn at background work, shared by its two lanes: a batch of quick jobs,
/// or one unit of a long job (an import's chunk and the rest after it, an export's archive, a
/// photo made anew stored), runs while holding it. So a worker keeps at most about one core
/// busy, as when every job ran in one line, and a quick job waits for the unit in hand, never
/// for a whole long run. Work on a `SCHED_IDLE` thread (reading a file, making a photo) takes
/// no turn: it yields to everything else anyway.
package final class JobTurn: Sendable {
    let turns = Turns(1)
    /// The machine's time the quick batches took since the long lane last asked.
    private let quickWork = Mutex(Duration.zero)

    @TaskLocal static var current: JobTurn?
    @TaskLocal private static var holding = false

    init() {}

    /// `work` holding the runner's turn; at once outside a runner (a service called directly)
    /// or inside a turn already held.
    package static func run<T>(_ work: () async throws -> T) async throws -> T {
        guard let current, !holding else { return try await work() }
        return try await current.turns.run { try await $holding.withValue(true) { try await work() } }
    }

    /// What the runner's quick batches (all of them, the wish alerts of an import's copies
    /// among them) took of the machine since the last call in this long job (zero outside a
    /// runner): an import rests for it as for its own chunks, so that they do not take the cores
    /// its rest leaves to requests.
    package static func quickWorkSinceLastAsked() -> Duration {
        current?.quickWork.withLock { work in
            defer { work = .zero }
            return work
        } ?? .zero
    }

    /// A quick batch, holding the turn, its time counted.
    func quick<T>(_ work: () async throws -> T) async throws -> T {
        try await turns.run {
            let begun = ContinuousClock.now
            defer { quickWork.withLock { $0 += ContinuousClock.now - begun } }
            return try await work()
        }
    }

    /// A long job starts: what quick batches took before it is not its to rest for.
    func startLong() {
        quickWork.withLock { $0 = .zero }
    }
}
