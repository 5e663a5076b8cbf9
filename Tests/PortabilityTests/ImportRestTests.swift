import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import Testing
@testable import BookwormCore
@testable import Portability
@testable import BookwormTestSupport

/// An import rests after each chunk, on the app's clock, for a share of the time the chunk took
/// and the quick jobs run since the last (`ImportPolicy.restPercent`), so that it leaves the
/// cores to requests part of the time.
@Suite struct ImportRestTests {
    @Test func theRestIsItsShareOfTheChunksTime() {
        var policy = ImportPolicy()
        #expect(policy.rest(after: .milliseconds(40)) == .milliseconds(40))
        policy.restPercent = 50
        #expect(policy.rest(after: .milliseconds(40)) == .milliseconds(20))
        policy.restPercent = 250
        #expect(policy.rest(after: .milliseconds(40)) == .milliseconds(100))
        policy.restPercent = 0
        #expect(policy.rest(after: .milliseconds(40)) == .zero)
    }

    @Test func anImportRestsAfterEachChunkButTheLastForAsLongAsTheChunkTook() async throws {
        try await withApp { app in
            let (me, id) = try await Self.goodreadsImport(app)
            // Seven lines, one refused as it is read (counted done with the first chunk); six
            // records, two a chunk: three chunks, and a rest after each of the first two.
            let runner = app.portabilityRunner(chunk: 2, chunksPerRun: 10, restPercent: 100)
            let begun = ContinuousClock.now
            let run = Task { try await runner.runDue() }
            defer { run.cancel() }
            // Reading the file waits for the process's one low-priority thread, which other tests share.
            #expect(try await eventually(within: 120) { app.clock.sleeperCount > 0 })
            let elapsed = (ContinuousClock.now - begun) / .seconds(1)
            let rest = try #require(app.clock.nextWake)
            #expect(rest > 0 && rest <= elapsed)
            // Resting, with its first chunk stored and visible.
            let resting = try await app.importStatus(me.token, id)
            #expect(resting["status"] as? String == "running")
            #expect(resting["done"] as? Int == 3)

            #expect(try await app.clock.wakeEachSleeper(until: { try await app.importStatus(me.token, id)["status"] as? String == "done" }) == 2)
            _ = try await run.value
        }
    }

    /// A quick batch run between two chunks (a second of the machine's time, waiting for the
    /// turn the first chunk's rest holds) is rested for after the second chunk.
    @Test func anImportRestsForTheQuickJobsRunBetweenItsChunksToo() async throws {
        try await withApp { app in
            let (me, id) = try await Self.goodreadsImport(app)
            let runner = app.portabilityRunner(chunk: 2, chunksPerRun: 10, restPercent: 100)
            let run = Task { try await runner.runDue() }
            defer { run.cancel() }
            #expect(try await eventually(within: 120) { app.clock.sleeperCount > 0 })
            let quick = Task { try await runner.turn.quick { try await Task.sleep(for: .seconds(1)) } }
            #expect(try await eventually(within: 60) { runner.turn.turns.waiting == 1 })
            app.clock.advance(by: try #require(app.clock.nextWake))
            try await quick.value
            #expect(try await eventually(within: 120) { app.clock.sleeperCount > 0 })
            #expect(try #require(app.clock.nextWake) >= 1, "the second chunk's rest left out the quick batch")
            _ = try await app.clock.wakeEachSleeper(until: { try await app.importStatus(me.token, id)["status"] as? String == "done" })
            _ = try await run.value
        }
    }

    @Test func aRunEndsAtItsTimeLimitOrAfterItsLastChunkWithoutAnotherRest() async throws {
        try await withApp { app in
            let (me, id) = try await Self.goodreadsImport(app)
            // At its time limit, a run ends after its chunk instead of resting.
            let limited = Task { try await app.portabilityRunner(chunk: 2, chunksPerRun: 10, restPercent: 100, runLimit: .zero).runDue() }
            defer { limited.cancel() }
            let ended = Finished()
            Task { _ = try? await limited.value; ended.set() }
            #expect(try await eventually(within: 120) { ended.isSet || app.clock.sleeperCount > 0 })
            #expect(app.clock.sleeperCount == 0, "the run rested past its time limit")
            guard ended.isSet else { return }
            #expect(try await limited.value == 1)
            #expect(try await app.importStatus(me.token, id)["done"] as? Int == 3)

            // Two chunks a run: one rest between them, none after the second.
            let run = Task { try await app.portabilityRunner(chunk: 1, chunksPerRun: 2, restPercent: 100).runDue() }
            defer { run.cancel() }
            let finished = Finished()
            Task { _ = try? await run.value; finished.set() }
            #expect(try await app.clock.wakeEachSleeper(until: { finished.isSet }) == 1)
            #expect(try await app.importStatus(me.token, id)["done"] as? Int == 5)
        }
    }

    @Test func aStoppingWorkerEndsTheRunDuringARestAndLeavesTheImportDue() async throws {
        try await withApp { app in
            let (me, id) = try await Self.goodreadsImport(app)
            let group = ServiceGroup(configuration: .init(services: [app.portabilityRunner(chunk: 2, chunksPerRun: 10, restPercent: 100)],
                                                          logger: Logger(label: "test-jobs")))
            let running = Task { try await group.run() }
            defer { running.cancel() }
            #expect(try await eventually(within: 120) { app.clock.sleeperCount > 0 })
            await group.triggerGracefulShutdown()
            // Without waiting for the clock: a rest that ignored the shutdown would sleep for ever.
            let stopped = try await eventually { app.clock.sleeperCount == 0 }
            #expect(stopped, "the rest outlasted the shutdown")
            guard stopped else { return }
            try await running.value

            // Stopped without waiting out the rest: the chunk is kept, and the job is due again at
            // once, leased to no one, no attempt spent.
            #expect(try await app.importStatus(me.token, id)["done"] as? Int == 3)
            let rows = try await app.db.query("""
                SELECT attempts::int8, lease_owner IS NULL, run_at <= \(app.clock.now()) FROM jobs WHERE kind = 'imports.run'
                """)
            var jobs: [(Int, Bool, Bool)] = []
            for try await row in rows.decode((Int, Bool, Bool).self) { jobs.append(row) }
            #expect(jobs.count == 1 && jobs.first?.0 == 0 && jobs.first?.1 == true && jobs.first?.2 == true)

            let runner = app.portabilityRunner(chunk: 2, chunksPerRun: 10)
            while try await runner.runDue() > 0 {}
            #expect(try await app.importStatus(me.token, id)["done"] as? Int == 7)
        }
    }

    /// A new user with a pin, and the id of the import of seven Goodreads lines they posted.
    static func goodreadsImport(_ app: TestApp) async throws -> (TestApp.Account, String) {
        let me = try await app.register()
        try await app.addPin(me.token)
        return (me, try await app.importFile(me.token, ImportTests.goodreadsFile(), contentType: "text/csv"))
    }
}

private final class Finished: Sendable {
    let value = Mutex(false)
    var isSet: Bool { value.withLock { $0 } }
    func set() { value.withLock { $0 = true } }
}
