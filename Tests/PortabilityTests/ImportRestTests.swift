import Foundation
import Synchronization
import Testing
@testable import BookwormCore
@testable import Portability
@testable import BookwormTestSupport

/// An import rests after each chunk, on the app's clock, for a share of the time the chunk took
/// (`ImportPolicy.restPercent`), so that it leaves the cores to requests part of the time.
@Suite struct ImportRestTests {
    @Test func anImportRestsAfterEachChunkForAsLongAsTheChunkTook() async throws {
        try await withApp { app in
            let me = try await app.register()
            try await app.addPin(me.token)
            let id = try await app.importFile(me.token, ImportTests.goodreadsFile(), contentType: "text/csv")
            // Seven lines, one refused as it is read (counted done with the first chunk); six
            // records, two a chunk: three chunks, and a rest after each of the first two.
            let runner = app.portabilityRunner(chunk: 2, chunksPerRun: 10, restPercent: 100)
            let begun = ContinuousClock.now
            let run = Task { try await runner.runDue() }
            #expect(try await eventually { app.clock.sleeperCount > 0 })
            let elapsed = (ContinuousClock.now - begun) / .seconds(1)
            let rest = try #require(app.clock.nextWake)
            #expect(rest > 0 && rest <= elapsed)
            // Resting, with its first chunk stored and visible.
            let resting = try await app.importStatus(me.token, id)
            #expect(resting["status"] as? String == "running")
            #expect(resting["done"] as? Int == 3)

            var rests = 0
            let finished = Finished()
            Task { _ = try? await run.value; finished.value.withLock { $0 = true } }
            while !finished.isSet {
                guard try await eventually(within: 60, interval: .milliseconds(5), { finished.isSet || app.clock.sleeperCount > 0 }) else { break }
                guard let wake = app.clock.nextWake else { continue }
                rests += 1
                app.clock.advance(by: wake)
            }
            #expect(rests == 2)
            #expect(try await app.importStatus(me.token, id)["status"] as? String == "done")
        }
    }
}

private final class Finished: Sendable {
    let value = Mutex(false)
    var isSet: Bool { value.withLock { $0 } }
}
