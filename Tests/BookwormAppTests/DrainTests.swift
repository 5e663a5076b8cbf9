import Foundation
import NIOConcurrencyHelpers
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import BookwormApp
@testable import BookwormCore
@testable import BookwormTestSupport

/// A rolling restart behind a load balancer: on SIGTERM a real `bookworm serve` says it is not
/// ready at once and keeps serving new connections for its drain, while the balancer (here:
/// clients that stop opening connections a second before the drain ends) moves away.
@Suite struct DrainTests {
    /// Long enough that a loaded machine's readiness check and clients fit in it.
    static let drainSeconds = 5.0

    @Test func sigtermUnderASteadyStreamOfNewConnectionsLosesNoneAndExitsCleanlyAfterTheDrain() async throws {
        try await withTestDatabase { settings, _ in
            let server = try await ServerProcess(databaseURL: settings.connectionURL,
                                                 environment: ["BOOKWORM_SHUTDOWN_DRAIN_SECONDS": String(Int(Self.drainSeconds))])
            let tally = Tally()
            // Blocking sockets, so threads of their own: on the cooperative pool they would hold
            // every thread it has on a two-core machine and nothing else here would run.
            let clients = (0..<4).map { _ in Task { try await offThePool { Self.connectRepeatedly(port: server.port, tally: tally) } } }
            #expect(try await eventually(within: 10) { tally.answered >= 20 })

            let signalled = ContinuousClock.now
            tally.signalled()
            kill(server.pid, SIGTERM)
            #expect(try await eventually(within: Self.drainSeconds - 2, interval: .milliseconds(20)) {
                (try? rawRequest(port: server.port, "GET", "/health/ready", timeout: 2))?.status == 503
            }, "/health/ready did not turn 503 well inside the drain")
            let status = try await offThePool { ChildProcess.wait(server.pid) }
            let stopped = ContinuousClock.now - signalled
            for client in clients { try await client.value }

            #expect(status == 0, "exit status \(status)\n\(server.log.suffix(2000))")
            #expect(stopped >= .seconds(Self.drainSeconds), "stopped after \(stopped), before the drain ended")
            #expect(tally.answeredAfterSignal >= 20, "few requests served during the drain: \(tally.answeredAfterSignal)")
            #expect(tally.lost == [], "requests lost: \(tally.lost)")
        }
    }

    @Test func aSecondSigtermEndsTheDrainAtOnce() async throws {
        try await withTestDatabase { settings, _ in
            let server = try await ServerProcess(databaseURL: settings.connectionURL,
                                                 environment: ["BOOKWORM_SHUTDOWN_DRAIN_SECONDS": "600"])
            let signalled = ContinuousClock.now
            kill(server.pid, SIGTERM)
            #expect(try await eventually(within: 5, interval: .milliseconds(20)) {
                (try? rawRequest(port: server.port, "GET", "/health/ready", timeout: 2))?.status == 503
            })
            #expect(try rawRequest(port: server.port, "GET", "/health/live", timeout: 5).status == 200, "still serving while draining")
            // Alive but not ready: the container's health check fails, so no new traffic comes.
            let health = try await offThePool { try ChildProcess.run(try bookwormBinary(), ["health", "--port", String(server.port)]) }
            #expect(health.status == 1, "the health command passed while the server drains")
            kill(server.pid, SIGTERM)
            let status = try await offThePool { ChildProcess.wait(server.pid) }
            #expect(status == 0, "exit status \(status)\n\(server.log.suffix(2000))")
            #expect(ContinuousClock.now - signalled < .seconds(60))
        }
    }

    @Test func readinessAnswers503WhileDrainingAndLivenessStays200() async throws {
        let drain = ShutdownDrain()
        try await withApp(configure: { $0.drain = drain }) { app in
            #expect(try await app.request(.get, "/health/ready").status == .ok)
            drain.begin()
            let ready = try await app.request(.get, "/health/ready")
            #expect(ready.status == .serviceUnavailable)
            #expect(ready.headers[.contentType] == "application/problem+json")
            #expect(ready.headers[.retryAfter] == "2")
            #expect(try await app.request(.get, "/health/live").status == .ok)
        }
    }

    /// New connections, one request each, as fast as they are answered; from a second before
    /// the drain ends, none (the balancer has moved away).
    private static func connectRepeatedly(port: Int, tally: Tally) {
        while !tally.balancerMovedAway(drain: drainSeconds) {
            do {
                let response = try rawRequest(port: port, "GET", "/health/live", timeout: 10)
                if response.status == 200 { tally.answer() } else { tally.lose("status \(response.status)") }
            } catch {
                tally.lose("\(error)")
            }
        }
    }

    final class Tally: Sendable {
        private struct State {
            var answered = 0, answeredAfterSignal = 0
            var lost: [String] = []
            var signalledAt: ContinuousClock.Instant?
        }
        private let state = NIOLockedValueBox(State())

        var answered: Int { state.withLockedValue { $0.answered } }
        var answeredAfterSignal: Int { state.withLockedValue { $0.answeredAfterSignal } }
        var lost: [String] { state.withLockedValue { $0.lost } }

        func signalled() { state.withLockedValue { $0.signalledAt = .now } }
        func answer() {
            state.withLockedValue { state in
                state.answered += 1
                if state.signalledAt != nil { state.answeredAfterSignal += 1 }
            }
        }
        func lose(_ what: String) { state.withLockedValue { $0.lost.append(what) } }
        func balancerMovedAway(drain: Double) -> Bool {
            state.withLockedValue { state in state.signalledAt.map { ContinuousClock.now - $0 > .seconds(drain - 1) } ?? false }
        }
    }
}
