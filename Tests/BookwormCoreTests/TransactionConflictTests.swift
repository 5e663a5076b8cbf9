import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import PostgresNIO
import Synchronization
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// A transaction PostgreSQL ends to break a deadlock changed nothing: it runs again, and one
/// that keeps colliding is answered 503 `contended`, never a 500.
@Suite struct TransactionConflictTests {
    /// PostgreSQL's own error, raised as its deadlock detector raises it.
    static let deadlock = PostgresQuery(unsafeSQL: "DO $$ BEGIN RAISE EXCEPTION 'deadlock detected' USING ERRCODE = '40P01'; END $$")

    final class Runs: Sendable {
        let count = Mutex(0)
        func next() -> Int { count.withLock { $0 += 1; return $0 } }
    }

    @Test func aTransactionEndedByADeadlockRunsAgainAndOnlyItsLastRunIsKept() async throws {
        try await withApp { app in
            try await app.db.query("CREATE TABLE runs (n int)")
            let runs = Runs(), logger = Logger(label: "t")
            let kept = try await app.db.transaction(logger: logger) { connection in
                let run = runs.next()
                try await connection.query("INSERT INTO runs VALUES (\(run))", logger: logger)
                if run == 1 { try await connection.query(Self.deadlock, logger: logger) }
                return run
            }
            #expect(kept == 2)
            var rows: [Int] = []
            for try await n in try await app.db.query("SELECT n FROM runs").decode(Int.self) { rows.append(n) }
            #expect(rows == [2])
        }
    }

    @Test func aTransactionThatKeepsCollidingIsAnswered503ContendedNotA500() async throws {
        try await withApp { app in
            let runs = Runs(), logger = Logger(label: "t")
            let database = app.db
            let router = Router(context: AppRequestContext.self)
            router.add(middleware: ProblemMiddleware())
            router.post("v1/things") { _, _ -> String in
                try await database.transaction(logger: logger) { connection in
                    _ = runs.next()
                    try await connection.query(Self.deadlock, logger: logger)
                    return "never"
                }
            }
            try await Application(router: router).test(.router) { client in
                let response = try await client.execute(uri: "/v1/things", method: .post)
                #expect(response.status == .serviceUnavailable)
                #expect(response.headers[.retryAfter] == "1")
                #expect(response.headers[.contentType] == "application/problem+json")
                #expect(String(buffer: response.body).contains("contended"))
            }
            #expect(runs.count.withLock { $0 } == Database.conflictAttempts)
        }
    }
}
