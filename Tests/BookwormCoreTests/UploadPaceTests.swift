import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// `UploadPace`: a burst passes at once, the rest at the rate, all uploads sharing it; time
/// pays the debt back; a clock set back keeps the backlog but not the jump; a wait past
/// `maxWait` is refused without a reservation; 0 is no limit; a tab pays in units and settles.
@Suite(.timeLimit(.minutes(10))) struct UploadPaceTests {
    static let mib = 1 << 20

    static func pace(_ clock: ManualClock, burst: Int = 4 * mib, maxWait: Double = 15) -> UploadPace {
        UploadPace(bytesPerSecond: mib, burstBytes: burst, maxWait: maxWait, clock: clock)
    }

    /// The seconds a turn waits (0: at once), or nil when refused.
    static func wait(_ turn: UploadPace.Turn) -> Double? {
        switch turn {
        case .now: 0
        case .after(let seconds): seconds
        case .refused: nil
        }
    }

    static func near(_ turn: UploadPace.Turn, _ seconds: Double) -> Bool {
        wait(turn).map { abs($0 - seconds) < 1e-6 } == true
    }

    @Test func aBurstPassesAtOnceAndWhatFollowsWaitsItsTurnAtTheRate() {
        let pace = Self.pace(ManualClock())
        #expect(pace.reserve(4 * Self.mib) == .now)
        // Two uploads after the burst: the second waits behind the first.
        #expect(Self.near(pace.reserve(Self.mib), 1))
        #expect(Self.near(pace.reserve(2 * Self.mib), 3))
    }

    @Test func timeThatPassesPaysTheDebtBack() {
        let clock = ManualClock()
        let pace = Self.pace(clock)
        #expect(pace.reserve(4 * Self.mib) == .now)
        clock.advance(by: 3)
        #expect(pace.reserve(3 * Self.mib) == .now)
        #expect(Self.near(pace.reserve(Self.mib), 1))
    }

    @Test func aClockSetBackKeepsTheBacklogButNotTheJump() {
        let clock = ManualClock()
        let pace = Self.pace(clock)
        #expect(Self.near(pace.reserve(5 * Self.mib), 1))
        clock.advance(by: -3600)
        #expect(Self.near(pace.reserve(Self.mib), 2))
    }

    @Test func aWaitPastTheLimitIsRefusedAndReservesNothing() async throws {
        let pace = Self.pace(ManualClock(), burst: 0, maxWait: 2)
        #expect(Self.near(pace.reserve(2 * Self.mib), 2))
        #expect(pace.reserve(Self.mib) == .refused(1))
        // The refused MiB was not reserved: half a MiB is past the limit by half a second, not one and a half.
        #expect(pace.reserve(Self.mib / 2) == .refused(0.5))
        let other = Self.pace(ManualClock(), burst: 0, maxWait: 2)
        _ = other.reserve(2 * Self.mib)
        await #expect(throws: AppError.self) { try await other.take(Self.mib) }
    }

    @Test func noRateTakesEverythingAtOnce() {
        let pace = UploadPace(bytesPerSecond: 0, clock: ManualClock())
        #expect(pace.reserve(1 << 30) == .now)
    }

    @Test func anUploadPaysAQuarterMiBAtATimeAndTheRestWhenItEnds() async throws {
        let clock = ManualClock()
        let pace = Self.pace(clock, burst: 0)
        let paid = Mutex(0)
        let upload = Task {
            var tab = UploadPace.Tab(pace)
            for _ in 0..<5 {
                try await tab.add(64 << 10)
                paid.withLock { $0 += 64 << 10 }
            }
            try await tab.settle()
            paid.withLock { $0 = -1 }
        }
        // Three reads are owed, not paid; the fourth makes a unit, a quarter second at 1 MiB/s.
        while clock.sleeperCount < 1 { await Task.yield() }
        #expect(paid.withLock { $0 } == 3 * (64 << 10))
        clock.advance(by: 0.25)
        // The fifth read is owed until the body ends, then paid: 64 KiB, a sixteenth of a second.
        while clock.sleeperCount < 1 || paid.withLock({ $0 }) < 5 * (64 << 10) { await Task.yield() }
        clock.advance(by: 0.0625)
        try await upload.value
        #expect(paid.withLock { $0 } == -1)
    }

    /// A body sent without a length is counted as it is read: past the limit it is a 413, and
    /// under it the paced read returns every byte.
    @Test func aPacedBodyWithoutALengthIsCutOffAtItsLimit() async throws {
        func request(_ parts: Int) -> Request {
            let chunks = AsyncStream<ByteBuffer> { continuation in
                for _ in 0..<parts { continuation.yield(ByteBuffer(repeating: 0x41, count: 300 << 10)) }
                continuation.finish()
            }
            return Request(head: HTTPRequest(method: .put, scheme: "http", authority: "x", path: "/"), body: RequestBody(asyncSequence: chunks))
        }
        let pace = UploadPace(bytesPerSecond: 1 << 30, clock: ManualClock())
        let large = request(4)
        do {
            _ = try await large.collectLimitedBody(limit: 1 << 20, pace: pace)
            Issue.record("1.2 MiB passed a limit of 1 MiB")
        } catch AppError.payloadTooLarge(let limit) {
            #expect(limit == 1 << 20)
        }
        let small = request(3)
        #expect(try await small.collectLimitedBody(limit: 1 << 20, pace: pace).count == 3 * (300 << 10))
    }
}
