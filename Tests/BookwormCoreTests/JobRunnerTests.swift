import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// The one leased-job machinery: every kind gets its turn in a batch, and a batch that outlasts
/// its lease runs no job that another worker took meanwhile.
@Suite struct JobRunnerTests {
    final class Ran: Sendable {
        let kinds = Mutex<[String]>([])
        let groups = Mutex<[[String]]>([])
    }

    struct Recording: JobHandler {
        let kind: String
        let ran: Ran
        var recurringKey: String? { nil }
        func run(_ job: ClaimedJob) async throws -> JobOutcome {
            ran.kinds.withLock { $0.append(kind) }
            return .done
        }
    }

    /// Records each call with the keys it got; the job keyed "fails" gets no outcome.
    struct Group: BatchJobHandler {
        let kind = "test.group"
        let ran: Ran
        func run(_ jobs: [ClaimedJob]) async -> [UUID: JobOutcome] {
            ran.groups.withLock { $0.append(jobs.map(\.key).sorted()) }
            return Dictionary(uniqueKeysWithValues: jobs.filter { $0.key != "fails" }.map { ($0.id, JobOutcome.done) })
        }
    }

    /// Records each run; each job named in `takes` moves the clock that far (the lease is 300 s),
    /// and the one named `meanwhileIn` then lets another worker run what is due.
    struct Slow: JobHandler {
        let kind = "test.slow"
        let ran: Ran
        let clock: ManualClock
        var takes: [String: TimeInterval] = [:]
        var meanwhileIn = ""
        var meanwhile: (@Sendable () async throws -> Void)?
        var recurringKey: String? { nil }
        func run(_ job: ClaimedJob) async throws -> JobOutcome {
            ran.kinds.withLock { $0.append(job.key) }
            clock.advance(by: takes[job.key] ?? 0)
            if job.key == meanwhileIn, let meanwhile { try await meanwhile() }
            return .done
        }
    }

    /// Three jobs claimed together by one runner (in this order, by due time) whose jobs take
    /// `takes` of the clock, and another runner that looks for due jobs during `meanwhileIn`:
    /// what the first runner claimed, what the other took meanwhile, and every run in order.
    static func runWithAnotherWorker(takes: [String: TimeInterval], meanwhileIn: String) async throws
        -> (claimed: Int, tookMeanwhile: Int, ran: [String])
    {
        let result = Mutex((claimed: 0, tookMeanwhile: 0, ran: [String]()))
        try await withApp { app in
            try await app.db.query("""
                INSERT INTO jobs (kind, key, run_at) VALUES ('test.slow', 'first', '-infinity'),
                    ('test.slow', 'second', \(app.clock.now().addingTimeInterval(-2))), ('test.slow', 'third', \(app.clock.now().addingTimeInterval(-1)))
                """)
            let ran = Ran(), logger = Logger(label: "test-jobs")
            let other = JobRunner(client: app.db, handlers: [Slow(ran: ran, clock: app.clock)], logger: logger, clock: app.clock)
            let tookMeanwhile = Mutex(0)
            let runner = JobRunner(client: app.db, handlers: [Slow(ran: ran, clock: app.clock, takes: takes, meanwhileIn: meanwhileIn) {
                let took = try await other.runDue()
                tookMeanwhile.withLock { $0 += took }
            }], logger: logger, clock: app.clock)
            let claimed = try await runner.runDue()
            #expect(try await other.runDue() == 0)
            result.withLock { $0 = (claimed, tookMeanwhile.withLock { $0 }, ran.kinds.withLock { $0 }) }
        }
        return result.withLock { $0 }
    }

    @Test func aBatchSkipsTheJobsAnotherWorkerTookOnceTheirLeaseRanOut() async throws {
        // The first job outlasts the whole lease: the other worker takes all three meanwhile.
        let run = try await Self.runWithAnotherWorker(takes: ["first": 350], meanwhileIn: "first")
        #expect(run.claimed == 3 && run.tookMeanwhile == 3)
        // The first ran twice (it outlasted its lease); the first runner ran none of the others.
        #expect(run.ran == ["first", "first", "second", "third"])
    }

    @Test func aBatchThatOutlastsItsLeaseRenewsItSoNoOtherWorkerTakesItsJobs() async throws {
        // 400 s after the claim, during the second, the third job's first lease has run out;
        // renewed before the second began, it was still the first runner's.
        let run = try await Self.runWithAnotherWorker(takes: ["first": 200, "second": 200], meanwhileIn: "second")
        #expect(run.claimed == 3 && run.tookMeanwhile == 0)
        #expect(run.ran == ["first", "second", "third"])
    }

    /// A grouped kind's jobs in a claim go to its handler in one call, beside the other kinds'
    /// one by one; one without an outcome is retried later, with backoff.
    @Test func aGroupedKindsJobsInAClaimRunInOneCallBesideTheOthers() async throws {
        try await withApp { app in
            try await app.db.query("""
                INSERT INTO jobs (kind, key, run_at) SELECT 'test.group', k, '-infinity' FROM unnest(ARRAY['a', 'b', 'c', 'fails']) k
                """)
            try await app.db.query("INSERT INTO jobs (kind, key, run_at) VALUES ('test.single', 'x', '-infinity'), ('test.single', 'y', '-infinity')")
            let ran = Ran()
            let runner = JobRunner(client: app.db, handlers: [Recording(kind: "test.single", ran: ran)], grouped: [Group(ran: ran)],
                                   logger: Logger(label: "test-jobs"), clock: app.clock)
            #expect(try await runner.runDue() == 6)
            #expect(ran.groups.withLock { $0 } == [["a", "b", "c", "fails"]])
            #expect(ran.kinds.withLock { $0 } == ["test.single", "test.single"])
            let left = try await app.db.query("SELECT key, attempts, run_at > \(app.clock.now()) FROM jobs WHERE kind LIKE 'test.%'")
            var rows: [(String, Int, Bool)] = []
            for try await row in left.decode((String, Int, Bool).self) { rows.append(row) }
            #expect(rows.count == 1 && rows.first?.0 == "fails" && rows.first?.1 == 1 && rows.first?.2 == true, "\(rows)")
            #expect(try await runner.runDue() == 0, "the retry waits for its backoff")
        }
    }

    @Test func aBacklogOfOneKindDoesNotHoldBackAnotherKindsJob() async throws {
        try await withApp { app in
            // An import's next chunks are due now; one-off jobs queued meanwhile are due at
            // -infinity, so by due time alone all fifty would go first.
            try await app.db.query("INSERT INTO jobs (kind, key, run_at) VALUES ('test.urgent', 'one', \(app.clock.now()))")
            try await app.db.query("""
                INSERT INTO jobs (kind, key, run_at) SELECT 'test.flood', n::text, '-infinity' FROM generate_series(1, 50) n
                """)
            let ran = Ran()
            let runner = JobRunner(client: app.db, handlers: [Recording(kind: "test.flood", ran: ran), Recording(kind: "test.urgent", ran: ran)],
                                   logger: Logger(label: "test-jobs"), clock: app.clock)
            #expect(try await runner.runDue() == 20)
            let first = ran.kinds.withLock { $0 }
            #expect(first.filter { $0 == "test.urgent" }.count == 1)
            #expect(first.prefix(2).contains("test.urgent"))
            while try await runner.runDue() > 0 {}
            #expect(ran.kinds.withLock { $0.count } == 51)
        }
    }

    /// A runner of `long` and of `test.quick`, running as a service with `long`'s job queued:
    /// `body` runs once that job waits at `gate` and a quick job is queued after it; then the
    /// runner is stopped gracefully (`body` opens the gate), with both jobs done.
    static func whileALongJobWaits(_ long: some JobHandler, ran: Ran, gate: Gate,
                                   _ body: @escaping @Sendable (TestApp, JobRunner, ServiceGroup) async throws -> Void) async throws {
        try await withApp { app in
            let runner = JobRunner(client: app.db, handlers: [long, Recording(kind: "test.quick", ran: ran)],
                                   logger: Logger(label: "test-jobs"), clock: app.clock)
            try await app.db.query("INSERT INTO jobs (kind, key, run_at) VALUES ('test.long', 'a', '-infinity')")
            let group = ServiceGroup(configuration: .init(services: [runner], logger: Logger(label: "test-jobs")))
            let running = Task { try await group.run() }
            defer { running.cancel() }
            #expect(try await eventually(within: 60) { gate.entered })
            try await app.db.query("INSERT INTO jobs (kind, key, run_at) VALUES ('test.quick', 'x', '-infinity')")
            try await body(app, runner, group)
            try await running.value
            #expect(try await app.db.query("SELECT 1 FROM jobs WHERE kind LIKE 'test.%'").rows.isEmpty, "a job left undone")
        }
    }

    /// A long kind's job (an import's run, between two chunks) that has not finished: the runner's
    /// other lane runs a job of another kind queued meanwhile, and a graceful stop waits for the long one.
    @Test func aLongJobStillRunningDoesNotHoldBackAnotherKindsJob() async throws {
        let ran = Ran(), gate = Gate()
        try await Self.whileALongJobWaits(Held(ran: ran, gate: gate), ran: ran, gate: gate) { _, _, group async throws in
            #expect(try await eventually(within: 60) { ran.kinds.withLock { $0 } == ["test.quick"] }, "the quick job waited")
            await group.triggerGracefulShutdown()
            gate.open()
        }
        #expect(ran.kinds.withLock { $0 } == ["test.quick", "test.long"])
    }

    /// The lanes share one turn: a quick job queued while a unit of a long job runs goes after
    /// that unit and before the long job's next, never after the whole long job.
    @Test func aQuickJobGoesBetweenTwoUnitsOfALongJob() async throws {
        let ran = Ran(), gate = Gate()
        try await Self.whileALongJobWaits(InUnits(ran: ran, gate: gate), ran: ran, gate: gate) { _, runner, group async throws in
            // The quick lane waits for the turn the first unit holds (it claims once it has it).
            #expect(try await eventually(within: 60) { runner.turn.turns.waiting == 1 })
            #expect(ran.kinds.withLock { $0 }.isEmpty)
            gate.open()
            #expect(try await eventually(within: 60) { ran.kinds.withLock { $0 }.count == 3 })
            await group.triggerGracefulShutdown()
        }
        #expect(ran.kinds.withLock { $0 } == ["unit 1", "test.quick", "unit 2"])
    }

    /// A unit that calls something which takes a turn itself (an export storing a photo made
    /// anew) runs it within the turn it holds, instead of waiting for itself for ever.
    @Test(.timeLimit(.minutes(1))) func aTurnTakenWithinATurnRunsAtOnce() async throws {
        let turn = JobTurn()
        let inner = try await JobTurn.$current.withValue(turn) {
            try await JobTurn.run { try await JobTurn.run { turn.turns.waiting } }
        }
        #expect(inner == 0)
    }

    /// A long job (an import, to rest for it) is told what the quick batches took since it
    /// last asked, and nothing from before it started.
    @Test func aLongJobIsToldWhatTheQuickBatchesTookSinceItLastAsked() async throws {
        let turn = JobTurn()
        // A batch's work, timed on the machine's clock: here, 20 ms of it.
        try await turn.quick { try await Task.sleep(for: .milliseconds(20)) }
        turn.startLong()
        #expect(JobTurn.$current.withValue(turn) { JobTurn.quickWorkSinceLastAsked() } == .zero)
        try await turn.quick { try await Task.sleep(for: .milliseconds(20)) }
        #expect(JobTurn.$current.withValue(turn) { JobTurn.quickWorkSinceLastAsked() } >= .milliseconds(20))
        #expect(JobTurn.$current.withValue(turn) { JobTurn.quickWorkSinceLastAsked() } == .zero)
        #expect(JobTurn.quickWorkSinceLastAsked() == .zero, "outside a runner")
    }

    /// Through the runner: a long job is told nothing of the quick batches before it started.
    @Test func aLongJobIsToldNothingOfTheQuickBatchesBeforeIt() async throws {
        try await withApp { app in
            let told = Told()
            let runner = JobRunner(client: app.db, handlers: [Asking(told: told)], logger: Logger(label: "test-jobs"), clock: app.clock)
            try await app.db.query("INSERT INTO jobs (kind, key, run_at) VALUES ('test.long', 'a', '-infinity')")
            try await runner.turn.quick { try await Task.sleep(for: .milliseconds(20)) }
            #expect(try await runner.runDue() == 1)
            #expect(told.durations.withLock { $0 } == [.zero])
        }
    }

    final class Told: Sendable {
        let durations = Mutex<[Duration]>([])
    }

    /// A long kind that records what it is told of the quick batches.
    struct Asking: JobHandler {
        let kind = "test.long"
        let told: Told
        var recurringKey: String? { nil }
        var runsLong: Bool { true }
        func run(_ job: ClaimedJob) async throws -> JobOutcome {
            let work = JobTurn.quickWorkSinceLastAsked()
            told.durations.withLock { $0.append(work) }
            return .done
        }
    }

    /// A long kind whose run is two units, the first waiting until the test opens `gate`.
    struct InUnits: JobHandler {
        let kind = "test.long"
        let ran: Ran
        let gate: Gate
        var recurringKey: String? { nil }
        var runsLong: Bool { true }
        func run(_ job: ClaimedJob) async throws -> JobOutcome {
            try await JobTurn.run {
                await gate.pass()
                ran.kinds.withLock { $0.append("unit 1") }
            }
            try await JobTurn.run { ran.kinds.withLock { $0.append("unit 2") } }
            return .done
        }
    }

    /// A long kind whose run waits until the test opens `gate`, between its units: it takes no
    /// turn (`JobTurn`), as an import reading its file takes none.
    struct Held: JobHandler {
        let kind = "test.long"
        let ran: Ran
        let gate: Gate
        var recurringKey: String? { nil }
        var runsLong: Bool { true }
        func run(_ job: ClaimedJob) async throws -> JobOutcome {
            await gate.pass()
            ran.kinds.withLock { $0.append(kind) }
            return .done
        }
    }

    final class Gate: Sendable {
        private let state = Mutex<(open: Bool, entered: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, false, []))
        var entered: Bool { state.withLock { $0.entered } }

        func pass() async {
            await withCheckedContinuation { continuation in
                let through = state.withLock { state in
                    state.entered = true
                    if !state.open { state.waiting.append(continuation) }
                    return state.open
                }
                if through { continuation.resume() }
            }
        }

        func open() {
            let waiting = state.withLock { state in
                state.open = true
                defer { state.waiting = [] }
                return state.waiting
            }
            for continuation in waiting { continuation.resume() }
        }
    }
}
