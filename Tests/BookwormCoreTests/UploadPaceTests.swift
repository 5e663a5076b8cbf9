import Foundation
import Synchronization
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// `UploadPace`: a burst passes at once, the rest at the rate, all uploads sharing it; time
/// pays the debt back; a clock set back keeps the backlog but not the jump; 0 is no limit.
@Suite(.timeLimit(.minutes(1))) struct UploadPaceTests {
    static let mib = 1 << 20

    @Test func aBurstPassesAtOnceAndWhatFollowsWaitsItsTurnAtTheRate() {
        let clock = ManualClock()
        let pace = UploadPace(bytesPerSecond: Self.mib, burstBytes: 4 * Self.mib, clock: clock)
        #expect(pace.reserve(4 * Self.mib) == nil)
        // Two uploads after the burst: the second waits behind the first.
        #expect(pace.reserve(Self.mib).map { abs($0 - 1) < 1e-6 } == true)
        #expect(pace.reserve(2 * Self.mib).map { abs($0 - 3) < 1e-6 } == true)
    }

    @Test func timeThatPassesPaysTheDebtBack() {
        let clock = ManualClock()
        let pace = UploadPace(bytesPerSecond: Self.mib, burstBytes: 4 * Self.mib, clock: clock)
        #expect(pace.reserve(4 * Self.mib) == nil)
        clock.advance(by: 3)
        #expect(pace.reserve(3 * Self.mib) == nil)
        #expect(pace.reserve(Self.mib).map { abs($0 - 1) < 1e-6 } == true)
    }

    @Test func aClockSetBackKeepsTheBacklogButNotTheJump() {
        let clock = ManualClock()
        let pace = UploadPace(bytesPerSecond: Self.mib, burstBytes: 4 * Self.mib, clock: clock)
        #expect(pace.reserve(5 * Self.mib).map { abs($0 - 1) < 1e-6 } == true)
        clock.advance(by: -3600)
        #expect(pace.reserve(Self.mib).map { abs($0 - 2) < 1e-6 } == true)
    }

    @Test func noRateTakesEverythingAtOnce() {
        let pace = UploadPace(bytesPerSecond: 0, clock: ManualClock())
        #expect(pace.reserve(1 << 30) == nil)
    }

    @Test func anUploadPaysAQuarterMiBAtATimeAndWaitsOnTheClock() async throws {
        let clock = ManualClock()
        let pace = UploadPace(bytesPerSecond: Self.mib, burstBytes: 0, clock: clock)
        let paid = Mutex(0)
        let upload = Task {
            var tab = UploadPace.Tab(pace)
            for _ in 0..<8 {
                try await tab.add(64 << 10)
                paid.withLock { $0 += 64 << 10 }
            }
        }
        // Three reads are owed, not paid; the fourth makes a unit, a quarter second at 1 MiB/s.
        while clock.sleeperCount < 1 { await Task.yield() }
        #expect(paid.withLock { $0 } == 3 * (64 << 10))
        clock.advance(by: 0.25)
        while clock.sleeperCount < 1 || paid.withLock({ $0 }) < 7 * (64 << 10) { await Task.yield() }
        #expect(paid.withLock { $0 } == 7 * (64 << 10))
        clock.advance(by: 0.25)
        try await upload.value
        #expect(paid.withLock { $0 } == 8 * (64 << 10))
    }
}
