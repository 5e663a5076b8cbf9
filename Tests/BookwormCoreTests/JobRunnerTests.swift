import Foundation
import Logging
import Synchronization
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// The one leased-job machinery: every kind gets its turn in a batch, and a batch that outlasts
/// its lease runs no job that another worker took meanwhile.
@Suite struct JobRunnerTests {
    final class Ran: Sendable {
        let kinds = Mutex<[String]>([])
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

    /// Records each run; `first` and `second` each take 200 s of the clock (the lease is 300),
    /// and `second` lets another worker run what is due meanwhile.
    struct Slow: JobHandler {
        let kind = "test.slow"
        let ran: Ran
        let clock: ManualClock
        let meanwhile: (@Sendable () async throws -> Void)?
        var recurringKey: String? { nil }
        func run(_ job: ClaimedJob) async throws -> JobOutcome {
            ran.kinds.withLock { $0.append(job.key) }
            guard let meanwhile, job.key != "third" else { return .done }
            clock.advance(by: 200)
            if job.key == "second" { try await meanwhile() }
            return .done
        }
    }

    @Test func aBatchThatOutlastsItsLeaseRunsNoJobAnotherWorkerTookMeanwhile() async throws {
        try await withApp { app in
            // Claimed in this order: by due time, all three at once by one runner.
            try await app.db.query("""
                INSERT INTO jobs (kind, key, run_at) VALUES ('test.slow', 'first', '-infinity'),
                    ('test.slow', 'second', \(app.clock.now().addingTimeInterval(-2))), ('test.slow', 'third', \(app.clock.now().addingTimeInterval(-1)))
                """)
            let ran = Ran(), logger = Logger(label: "test-jobs")
            let other = JobRunner(client: app.db, handlers: [Slow(ran: ran, clock: app.clock, meanwhile: nil)], logger: logger, clock: app.clock)
            let tookMeanwhile = Mutex(0)
            let runner = JobRunner(client: app.db, handlers: [Slow(ran: ran, clock: app.clock, meanwhile: {
                // 400 s after the claim: the third job's first lease has run out.
                let took = try await other.runDue()
                tookMeanwhile.withLock { $0 += took }
            })], logger: logger, clock: app.clock)
            #expect(try await runner.runDue() == 3)
            // Renewed before the second began, the third was still the first runner's.
            #expect(tookMeanwhile.withLock { $0 } == 0)
            #expect(ran.kinds.withLock { $0 } == ["first", "second", "third"])
            #expect(try await other.runDue() == 0)
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
}
