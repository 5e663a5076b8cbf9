import Foundation
import Logging
import Synchronization
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// The one leased-job machinery's order: every kind gets its turn in a batch.
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
