import Foundation
import Logging
import Metrics
import NIOConcurrencyHelpers
import PostgresNIO
import ServiceLifecycle

/// One kind of background work. `run` must be safe to repeat: a crash after it did its work
/// but before the job was marked makes the job due again.
package protocol JobHandler: Sendable {
    var kind: String { get }
    /// A recurring job has one row under this key, created at start-up; nil for one-off jobs.
    var recurringKey: String? { get }
    /// When a recurring job first runs, once its row is made.
    func firstRun(after now: Date) -> Date
    /// A run may take up to a minute (an import's chunks, an export's archive, photos made
    /// anew): such kinds have a lane of their own, one job at a time, so that a trade's expiry
    /// or a wish's alert never waits behind them.
    var runsLong: Bool { get }
    func run(_ job: ClaimedJob) async throws -> JobOutcome
}

extension JobHandler {
    package func firstRun(after now: Date) -> Date { now }
    package var runsLong: Bool { false }
}

/// A kind of one-off work whose due jobs run together in one call: pushes share one HTTP/2
/// connection per provider, so a batch goes out at once rather than one request after another;
/// wish alerts of newly listed copies look up a whole batch of copies in one statement.
package protocol BatchJobHandler: Sendable {
    var kind: String { get }
    /// What became of each job, by id; a job missing from the answer is retried with backoff.
    func run(_ jobs: [ClaimedJob]) async -> [UUID: JobOutcome]
}

/// Runs due jobs of the kinds it has handlers for. Several runners (in one process or many)
/// share the table: a job is leased to one runner at a time, and a failed run is retried with
/// exponential backoff. Wakes on `NOTIFY jobs`, and polls on the app's clock. Kinds that run
/// long (`JobHandler.runsLong`) are claimed and run on a lane of their own, beside the others.
package struct JobRunner: Service {
    /// Kinds claimed together, and how many jobs at a time. A quick lane's batch holds the
    /// runner's turn (`JobTurn`) while it runs; a long lane's job takes it for each of its units.
    struct Lane {
        let kinds: [String]
        let batchSize: Int
        var long = false
    }

    let store: JobStore
    let handlers: [String: any JobHandler]
    /// Kinds among the general runner's whose claimed jobs run together (`runGroups`).
    let groupHandlers: [String: any BatchJobHandler]
    let batchHandler: (any BatchJobHandler)?
    let client: Database
    let logger: Logger
    let clock: any AppClock
    package let id = UUID()
    var batchSize = 20
    /// One long job at a time: another process's runner takes the next meanwhile. (The quick
    /// time a long job is told of starts with its batch: one job, `JobTurn.startLong`.)
    static let longBatchSize = 1
    /// Shared by the lanes (and by every copy of this runner).
    let turn = JobTurn()
    var lease: TimeInterval = 300
    var pollInterval: TimeInterval = 30

    /// `grouped`: kinds whose jobs in a claimed batch run in one call each, before the others
    /// (a kind among `handlers` too runs as a group).
    package init(client: Database, handlers: [any JobHandler], grouped: [any BatchJobHandler] = [], logger: Logger, clock: any AppClock) {
        self.client = client
        self.store = JobStore(client: client, logger: logger, clock: clock)
        let groupHandlers = Dictionary(grouped.map { ($0.kind, $0) }, uniquingKeysWith: { first, _ in first })
        self.handlers = Dictionary(handlers.filter { groupHandlers[$0.kind] == nil }.map { ($0.kind, $0) }, uniquingKeysWith: { first, _ in first })
        self.groupHandlers = groupHandlers
        self.batchHandler = nil
        self.logger = logger
        self.clock = clock
    }

    /// A runner of one batch kind, `batchSize` jobs at a time, each leased for `lease` seconds
    /// (two batches are out at once: the lease must cover both).
    package init(client: Database, batch handler: any BatchJobHandler, batchSize: Int, lease: TimeInterval, logger: Logger,
                 clock: any AppClock) {
        self.client = client
        self.store = JobStore(client: client, logger: logger, clock: clock)
        self.handlers = [:]
        self.groupHandlers = [:]
        self.batchHandler = handler
        self.batchSize = batchSize
        self.lease = lease
        self.logger = logger
        self.clock = clock
    }

    /// The short kinds (grouped ones among them); every kind of a batch runner.
    var quick: Lane {
        Lane(kinds: batchHandler.map { [$0.kind] } ?? handlers.values.filter { !$0.runsLong }.map(\.kind) + groupHandlers.keys,
             batchSize: batchSize)
    }

    var long: Lane {
        Lane(kinds: handlers.values.filter(\.runsLong).map(\.kind), batchSize: Self.longBatchSize, long: true)
    }

    package func run() async throws {
        let (quick, long) = (quick, long)
        let wakes = (quick: WakeSignal(clock: clock), long: WakeSignal(clock: clock))
        let stopping = NIOLockedValueBox(false)
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await client.listen("jobs", waking: [wakes.quick, wakes.long], logger: logger) }
                // A stopping runner finishes each lane's batch in hand; only then does it stop listening.
                let lanes = [(quick, wakes.quick), (long, wakes.long)].filter { !$0.0.kinds.isEmpty }
                await withTaskGroup(of: Void.self) { group in
                    for (index, (lane, wake)) in lanes.enumerated() {
                        group.addTask { await loop(lane, wake: wake, stopping: stopping, prepares: index == 0) }
                    }
                }
                group.cancelAll()
            }
        } onGracefulShutdown: {
            stopping.withLockedValue { $0 = true }
            Task { await wakes.quick.signal(); await wakes.long.signal() }
        }
    }

    /// Claims and runs `lane`'s batches until the runner stops: at once again while there is
    /// more, otherwise on a notification or the next poll.
    private func loop(_ lane: Lane, wake: WakeSignal, stopping: NIOLockedValueBox<Bool>, prepares: Bool) async {
        var prepared = !prepares
        while !stopping.withLockedValue({ $0 }) && !Task.isCancelled {
            do {
                // Once (again after a failure), not on every poll.
                if !prepared { try await prepare(); prepared = true }
                let batch = try await runBatch(lane, unless: { stopping.withLockedValue { $0 } })
                if batch.claimed == lane.batchSize || batch.dueAgain { continue }
            } catch {
                // A cancelled runner's batch ends with the cancellation: nothing failed.
                if !Task.isCancelled { logger.error("job batch failed", metadata: ["error": .string(String(reflecting: error))]) }
            }
            await wake.wait(timeout: pollInterval)
        }
    }

    /// Creates the rows of recurring jobs that do not exist yet.
    package func prepare() async throws {
        for handler in handlers.values {
            if let key = handler.recurringKey {
                try await store.ensure(kind: handler.kind, key: key, at: handler.firstRun(after: clock.now()))
            }
        }
    }

    /// Claims one batch of due jobs on each lane and runs them; returns how many it claimed.
    /// Tests call this after moving the clock.
    @discardableResult
    package func runDue() async throws -> Int {
        var claimed = 0
        for lane in [quick, long] where !lane.kinds.isEmpty { claimed += try await runBatch(lane).claimed }
        return claimed
    }

    /// One batch; `dueAgain` when a job asked to run again at once (an import's next chunks),
    /// so the runner goes on instead of waiting for a wake-up. A quick batch is not claimed once
    /// `stopped` (the runner may have waited for its turn behind a long job's unit).
    private func runBatch(_ lane: Lane, unless stopped: () -> Bool = { false }) async throws -> (claimed: Int, dueAgain: Bool) {
        if let batchHandler { return try await runTogether(batchHandler) }
        if lane.long {
            turn.startLong()
            return try await JobTurn.$current.withValue(turn) { try await runClaimed(lane) }
        }
        return try await turn.quick { stopped() ? (0, false) : try await runClaimed(lane) }
    }

    private func runClaimed(_ lane: Lane) async throws -> (claimed: Int, dueAgain: Bool) {
        var leasedAt = clock.now()
        var jobs = try await store.claim(kinds: lane.kinds, worker: id, batch: lane.batchSize, lease: lease)
        let claimed = jobs.count
        await runGroups(&jobs)
        var dueAgain = false
        while !jobs.isEmpty {
            // The batch's jobs run one after another under one lease: one that would start past
            // half of it renews the rest, and skips those another worker took once it ran out.
            // A job is not renewed while it runs: one that runs longer than the lease's second
            // half may still be run again by another worker.
            if clock.now().timeIntervalSince(leasedAt) > lease / 2 {
                let held = try await store.renew(jobs.map(\.id), worker: id, lease: lease)
                leasedAt = clock.now()
                jobs.removeAll { !held.contains($0.id) }
                continue
            }
            let job = jobs.removeFirst()
            guard let handler = handlers[job.kind] else { continue }
            Counter(label: "bookworm_jobs_runs_total", dimensions: [("kind", job.kind)]).increment()
            do {
                let outcome = try await handler.run(job)
                if case .again(let at) = outcome, at <= clock.now() { dueAgain = true }
                try await store.finish(job, worker: id, outcome: outcome)
            } catch let cancelled as CancellationError where Task.isCancelled {
                // The runner is going away, not the job failing: its lease runs out and it runs again.
                throw cancelled
            } catch {
                Counter(label: "bookworm_jobs_failures_total", dimensions: [("kind", job.kind)]).increment()
                let delay = Self.backoff(attempts: job.attempts)
                logger.warning("job failed; retrying", metadata: ["kind": .string(job.kind), "key": .string(job.key),
                                                               "error": .string(String(reflecting: error))])
                try await store.retry(job, worker: id, after: delay, error: String(reflecting: error))
            }
        }
        return (claimed, dueAgain)
    }

    /// The claimed jobs of each grouped kind, in one call per kind, taken out of `jobs`, before
    /// the others; their outcomes are written in one statement. Not renewed while they run: a
    /// grouped kind must be safe to run twice at once, as it is once it outlasts its lease.
    /// Outcomes that cannot be written are logged and do not hold up the rest of the claim:
    /// those jobs run again when their lease ends.
    private func runGroups(_ jobs: inout [ClaimedJob]) async {
        for (kind, handler) in groupHandlers {
            let group = jobs.filter { $0.kind == kind }
            guard !group.isEmpty else { continue }
            jobs.removeAll { $0.kind == kind }
            Counter(label: "bookworm_jobs_runs_total", dimensions: [("kind", kind)]).increment(by: group.count)
            do {
                try await finish(group, await handler.run(group))
            } catch {
                logger.error("job outcomes not written; they run again when their lease ends",
                             metadata: ["kind": .string(kind), "jobs": .stringConvertible(group.count),
                                        "error": .string(String(reflecting: error))])
            }
        }
    }

    /// A batch's outcomes in one statement; a job without one is retried with backoff.
    private func finish(_ jobs: [ClaimedJob], _ outcomes: [UUID: JobOutcome]) async throws {
        let now = clock.now()
        try await store.finish(jobs.map { job in
            (job.id, outcomes[job.id] ?? .retry(at: now.addingTimeInterval(Self.backoff(attempts: job.attempts)), reason: "no outcome"))
        }, worker: id)
    }

    /// Up to `batchesPerCall` batches of one kind, two at a time: the next batch is claimed as
    /// soon as one starts, and started at once (the handler shares its own window between them),
    /// so the handler's connection never waits on the database between batches. `dueAgain` when
    /// the last batch was full (the runner goes on at once, having looked at its stop flag). A
    /// batch started is always awaited and its outcomes written.
    private func runTogether(_ handler: any BatchJobHandler) async throws -> (claimed: Int, dueAgain: Bool) {
        let (kinds, worker, size, lease) = ([handler.kind], id, batchSize, lease)
        let first = try await store.claim(kinds: kinds, worker: worker, batch: size, lease: lease)
        var current = first
        var running = first.isEmpty ? nil : Task { await handler.run(first) }
        var (claimed, batches, last, failure): (Int, Int, Int, (any Error)?) = (0, 0, 0, nil)
        while let run = running {
            claimed += current.count
            last = current.count
            batches += 1
            Counter(label: "bookworm_jobs_runs_total", dimensions: [("kind", handler.kind)]).increment(by: current.count)
            var next: [ClaimedJob] = []
            if current.count == size, batches < Self.batchesPerCall, failure == nil {
                do {
                    next = try await store.claim(kinds: kinds, worker: worker, batch: size, lease: lease)
                } catch {
                    failure = error
                }
            }
            running = next.isEmpty ? nil : Task { [next] in await handler.run(next) }
            let outcomes = await run.value
            do {
                try await finish(current, outcomes)
            } catch {
                failure = failure ?? error
            }
            current = next
        }
        if let failure { throw failure }
        return (claimed, batches == Self.batchesPerCall && last == size)
    }

    /// Batches one `runDue` call runs before the runner checks whether it should stop.
    static let batchesPerCall = 8

    /// Seconds before a failed job's next try: 30 s doubling to an hour, jittered.
    package static func backoff(attempts: Int) -> TimeInterval {
        min(30 * pow(2, Double(max(0, attempts - 1))), 3600) * Double.random(in: 0.75...1.25)
    }
}
