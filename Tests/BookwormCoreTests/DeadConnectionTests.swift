import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// A backend that ends while its connection is in use (an operator's `pg_terminate_backend`, a
/// restart, a failover) leaves the pool holding a closed connection until it hears of the
/// close, and PostgresNIO 1.33.2 hands it out: a statement on it never answered, and an outbox
/// test once waited on one for good. `Database` takes only open connections.
@Suite struct DeadConnectionTests {
    @Test func aStatementRightAfterItsConnectionsBackendEndedAnswersInsteadOfHanging() async throws {
        try await withTestDatabase { settings, admin in
            let logger = Logger(label: "dead-connection")
            // One connection, so the next statement gets the one whose backend just ended.
            try await settings.makeClient(poolSize: 1, logger: logger).whileRunning { pool in
                let database = Database.forTests(pool)
                for round in 0..<150 {
                    let pid = try await backendPID(database)
                    let running = Task { try? await database.query("SELECT pg_sleep(10)", logger: logger) }
                    // Ended mid-statement: once the backend is seen running it.
                    #expect(try await eventually {
                        try await admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = \(pid) AND state = 'active'",
                                              logger: logger).collect().isEmpty == false
                    })
                    try await admin.query("SELECT pg_terminate_backend(\(pid))", logger: logger)
                    _ = await running.value
                    // Past the acquire deadline (30 s), short of a statement's (60 s in all).
                    let outcome = await answerWithin(.seconds(45)) { try await database.query("SELECT 1", logger: logger) }
                    // Answered: rows, or an outage the callers retry (never a statement's deadline).
                    #expect(outcome == "rows" || outcome == "outage", "round \(round): \(outcome)")
                    if outcome != "rows" && outcome != "outage" { break }
                }
            }
        }
    }
}

/// The backend's pid, taking another connection while the pool still hands out a closed one
/// or has none to give.
private func backendPID(_ database: Database) async throws -> Int32 {
    for _ in 0..<20 {
        do {
            for try await pid in try await database.query("SELECT pg_backend_pid()", logger: Logger(label: "pid")).decode(Int32.self) {
                return pid
            }
        } catch let error as DatabaseDeadlineExceeded where !error.leased {
            // PostgresNIO's pool leaves a request that queued while its only connection was
            // closing without a connection until another request comes (it keeps no minimum).
            continue
        } catch where DatabaseOutage.matches(error) && !(error is DatabaseDeadlineExceeded) {
            continue
        }
    }
    throw TestFailure("no open connection in 20 tries")
}

/// "rows", "outage" (a closed connection, or none in time: the pool quirk above; retried by
/// callers), "deadline" (a statement's), another error, or "hung" when nothing answered within
/// `limit`.
private func answerWithin(_ limit: Duration, _ work: @escaping @Sendable () async throws -> Rows) async -> String {
    await withTaskGroup(of: String.self) { group in
        group.addTask {
            do {
                _ = try await work()
                return "rows"
            } catch let error as DatabaseDeadlineExceeded where error.leased {
                return "deadline"
            } catch where DatabaseOutage.matches(error) {
                return "outage"
            } catch {
                return "error: \(String(reflecting: error).prefix(120))"
            }
        }
        group.addTask {
            try? await Task.sleep(for: limit)
            return "hung"
        }
        let first = await group.next() ?? "none"
        group.cancelAll()
        return first
    }
}
