#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import BookwormCore

/// The background thread (an import's reading, an old upload made anew) runs work in the
/// policy its caller asks: `SCHED_IDLE` in production, ordinary where tests say so, whatever
/// ran before (a thread without `CAP_SYS_NICE` cannot leave `SCHED_IDLE`).
@Suite struct LowPriorityThreadTests {
    @Test func eachPieceOfWorkRunsInThePolicyItsCallerAsks() async throws {
        #if os(Linux)
        // SCHED_IDLE is 5, SCHED_OTHER 0.
        #expect(try await LowPriorityThread.background(idle: true) { sched_getscheduler(0) } == 5)
        #expect(try await LowPriorityThread.background(idle: false) { sched_getscheduler(0) } == 0)
        #endif
    }
}
