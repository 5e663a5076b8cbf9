/// A job runner's one turn at background work, shared by its two lanes: a batch of quick jobs,
/// or one unit of a long job (an import's chunk and the rest after it, an export's archive, a
/// photo made anew stored), runs while holding it. So a worker keeps at most about one core
/// busy, as when every job ran in one line, and a quick job waits for the unit in hand, never
/// for a whole long run. Work on a `SCHED_IDLE` thread (reading a file, making a photo) takes
/// no turn: it yields to everything else anyway.
package enum JobTurn {
    @TaskLocal static var current: Turns?

    /// `work` holding the runner's turn; at once outside a runner (a service called directly)
    /// or inside a turn already held.
    package static func run<T>(_ work: () async throws -> T) async throws -> T {
        guard let current else { return try await work() }
        return try await current.run { try await $current.withValue(nil) { try await work() } }
    }
}
