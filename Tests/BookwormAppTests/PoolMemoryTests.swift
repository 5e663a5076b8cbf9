import Foundation
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// What a query costs a process's memory once it is answered: nothing, while the main pool keeps
/// its connections open. PostgresNIO arms an idle timer (a `Task.sleep`) when it parks a
/// connection it may close, and cancels it at the next lease; a cancelled `Task.sleep` keeps its
/// memory until its deadline, a minute later (swiftlang/swift#60441).
@Suite struct PoolMemoryTests {
    static let warmUp = 300
    static let window = 1_500

    @Test func queriesOnAPoolThatKeepsItsConnectionsOpenLeaveNoMemoryBehind() async throws {
        let grown = try await growth(environment: [:])
        #expect(grown < 512 << 10, "RSS grew \(grown) bytes over \(Self.window) queries")
    }

    /// When this fails, swiftlang/swift#60441 is fixed (or PostgresNIO no longer arms a timer
    /// per park): pools may again open their connections as needed
    /// (`DatabaseSettings.clientConfiguration` keeps them all open by default).
    @Test func aCancelledSleepStillHoldsItsMemoryUntilItsDeadline() async throws {
        let grown = try await growth(environment: ["BOOKWORM_DB_POOL_MIN": "0"])
        #expect(grown > 640 << 10, "RSS grew \(grown) bytes over \(Self.window) queries")
    }

    /// How much the RSS of a `bookworm serve` grows over `window` requests that each run a
    /// statement on the main pool (`GET /v1/me/pins`), one at a time on one connection, after
    /// `warmUp` of them: the smaller growth of two windows in a row, so that a one-off step (a
    /// thread's first allocations, with the machine busy) is not taken for a cost per query.
    private func growth(environment: [String: String]) async throws -> Int {
        try await withTestDatabase { settings, _ in
            let server = try await ServerProcess(databaseURL: settings.connectionURL, environment: environment)
            defer { server.stop() }
            let token = try ImportBudgetTests.register(port: server.port)
            let socket = try RawSocket(port: server.port)
            let request = "GET /v1/me/pins HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n\r\n"
            func ask(_ times: Int) throws -> Int {
                let started = ContinuousClock.now
                for _ in 0..<times {
                    try socket.send(request)
                    let status = socket.readResponse(timeout: 10)?.status
                    guard status == 200 else { throw TestFailure("GET /v1/me/pins answered \(String(describing: status))") }
                }
                // A window longer than the timers' minute would let the first ones go before it ends.
                guard ContinuousClock.now - started < .seconds(40) else { throw TestFailure("\(times) requests took over 40 s") }
                return try Self.residentBytes(server.pid)
            }
            let start = try ask(Self.warmUp), middle = try ask(Self.window), end = try ask(Self.window)
            return min(middle - start, end - middle)
        }
    }

    static func residentBytes(_ pid: pid_t) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kib = Int(line.split(separator: " ").dropFirst().first ?? "") else { throw TestFailure("no VmRSS for \(pid)") }
        return kib * 1024
    }
}
