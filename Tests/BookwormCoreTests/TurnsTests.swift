import Synchronization
import Testing
@testable import BookwormCore

/// `Turns`: at most its limit run at once, the others in arrival order; a caller cancelled in
/// line leaves it, and a turn is given back whatever the work does.
@Suite(.timeLimit(.minutes(10))) struct TurnsTests {
    struct Failure: Error {}

    /// What the callers saw, shared with their tasks.
    final class Seen: Sendable {
        let running = Mutex(0), most = Mutex(0), started = Mutex<[Int]>([]), holding = Mutex(false)
        var order: [Int] { started.withLock { $0 } }
    }

    @Test func atMostTheLimitRunAtOnceAndTheOthersGoInArrivalOrder() async throws {
        let turns = Turns(2)
        let seen = Seen()
        let releases = (0..<5).map { _ in AsyncStream.makeStream(of: Void.self) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<5 {
                group.addTask {
                    try await turns.run {
                        let now = seen.running.withLock { count -> Int in
                            count += 1
                            return count
                        }
                        seen.most.withLock { $0 = max($0, now) }
                        seen.started.withLock { $0.append(index) }
                        for await _ in releases[index].stream {}
                        seen.running.withLock { $0 -= 1 }
                    }
                }
                // The next caller comes only once this one runs or stands in line.
                while seen.order.count + turns.waiting < index + 1 { await Task.yield() }
            }
            #expect(seen.order == [0, 1])
            #expect(turns.waiting == 3)
            releases[1].continuation.finish()
            while seen.order.count < 3 { await Task.yield() }
            #expect(seen.order == [0, 1, 2])
            releases[0].continuation.finish()
            while seen.order.count < 4 { await Task.yield() }
            #expect(seen.order == [0, 1, 2, 3])
            for index in 2..<5 { releases[index].continuation.finish() }
            try await group.waitForAll()
        }
        #expect(seen.order == [0, 1, 2, 3, 4])
        #expect(seen.most.withLock { $0 } == 2)
    }

    @Test func aCallerCancelledInLineLeavesItAndNoTurnIsLost() async throws {
        let turns = Turns(1)
        let (held, release) = AsyncStream.makeStream(of: Void.self)
        let seen = Seen()
        let holder = Task {
            try await turns.run {
                seen.holding.withLock { $0 = true }
                for await _ in held {}
            }
        }
        while !seen.holding.withLock({ $0 }) { await Task.yield() }
        let waiter = Task { try await turns.run { "ran" } }
        while turns.waiting == 0 { await Task.yield() }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(turns.waiting == 0)
        release.finish()
        try await holder.value
        #expect(try await turns.run { "after" } == "after")
    }

    @Test func workThatThrowsGivesItsTurnBack() async throws {
        let turns = Turns(1)
        await #expect(throws: Failure.self) { try await turns.run { throw Failure() } }
        #expect(try await turns.run { 1 } == 1)
    }
}
