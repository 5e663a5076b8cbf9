import Foundation
import Testing
@testable import BookwormTestSupport

/// The test support's own rule for servers that must know their port before they start.
@Suite struct ServerProcessTests {
    @Test func aPortTakenBeforeTheServerBoundIsChosenAgainAndOtherFailuresAreNot() async throws {
        var tried: [Int] = []
        try await ServerProcess.withFreePort { port in
            tried.append(port)
            if tried.count == 1 { throw TestFailure("server did not come up: bind(...): Address already in use (errno: 98)") }
        }
        #expect(tried.count == 2)

        var failed = 0
        await #expect(throws: TestFailure.self) {
            try await ServerProcess.withFreePort { _ in
                failed += 1
                throw TestFailure("server did not come up: migration 7 failed")
            }
        }
        #expect(failed == 1)
    }
}
