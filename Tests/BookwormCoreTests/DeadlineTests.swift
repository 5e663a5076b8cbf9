import Foundation
import Logging
import PostgresNIO
import Synchronization
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// The deadlines of database calls: the watch on its own, swept by hand, then real calls on a
/// real pool that has no connection to spare or a statement that does not end.
@Suite struct DeadlineTests {
    let logger = Logger(label: "test")

    @Test func aWatchedCallFiresOnceWhenDueAndNeverOnceRemoved() {
        let watch = DeadlineWatch(tick: nil)
        let start = ContinuousClock.now
        let fired = Mutex<[String]>([])
        let late = watch.add(isDue: { $0 >= start + .seconds(1) }, fire: { fired.withLock { $0.append("late") } })
        let removed = watch.add(isDue: { $0 >= start + .seconds(1) }, fire: { fired.withLock { $0.append("removed") } })
        watch.remove(removed)

        watch.sweep(now: start + .milliseconds(999))
        #expect(fired.withLock { $0 }.isEmpty)
        watch.sweep(now: start + .seconds(2))
        watch.sweep(now: start + .seconds(3))
        #expect(fired.withLock { $0 } == ["late"])
        #expect(watch.watching == 0)
        watch.remove(late)  // after firing: nothing left to remove, nothing breaks
    }

    @Test func aLeasedCallIsDueAtItsStatementDeadlineNotAtTheAcquireOne() {
        let watch = DeadlineWatch(tick: nil)
        let start = ContinuousClock.now
        let lease = OnceFlag()
        let fired = Mutex(0)
        _ = watch.add(isDue: { $0 >= (lease.isSet ? start + .seconds(5) : start + .seconds(1)) }, fire: { fired.withLock { $0 += 1 } })
        lease.set()
        watch.sweep(now: start + .seconds(2))
        #expect(fired.withLock { $0 } == 0)
        watch.sweep(now: start + .seconds(5))
        #expect(fired.withLock { $0 } == 1)
    }

    @Test func aCallWithNoConnectionInTimeIsAnsweredAtTheAcquireDeadline() async throws {
        try await withTestDatabase(empty: true) { settings, _ in
            try await settings.makeClient(poolSize: 1, logger: logger).whileRunning { client in
                let database = Database(client: client, deadlines: .init(acquire: .milliseconds(300), statement: .milliseconds(300)))
                let (leased, holder) = AsyncStream.makeStream(of: Void.self)
                // Holds the only connection for 20 s, on the raw client: no deadline of ours ends it.
                async let held: Void = client.withConnection { connection in
                    holder.yield()
                    _ = try await connection.query("SELECT pg_sleep(20)", logger: logger)
                }
                for await _ in leased { break }
                let start = ContinuousClock.now
                let error = await #expect(throws: DatabaseDeadlineExceeded.self) {
                    try await database.query("SELECT 1", logger: logger)
                }
                #expect(error?.leased == false)
                #expect(ContinuousClock.now - start < .seconds(15), "answered only when the holder let go")
                try await held
            }
        }
    }

    @Test func aStatementThatDoesNotEndIsAbandonedAtItsDeadline() async throws {
        try await withTestDatabase(empty: true) { settings, _ in
            try await settings.makeClient(poolSize: 2, logger: logger).whileRunning { client in
                // A generous acquire deadline: on a machine busy with every other test, even an
                // idle connection's lease can wait a while for a thread.
                let database = Database(client: client, deadlines: .init(acquire: .seconds(10), statement: .milliseconds(300)))
                try await client.query("SELECT 1", logger: logger)  // a connection is open: the next lease is quick
                let start = ContinuousClock.now
                let error = await #expect(throws: DatabaseDeadlineExceeded.self) {
                    try await database.query("SELECT pg_sleep(60)", logger: logger)
                }
                #expect(error?.leased == true)
                // Due 10.8 s after the call (acquire, statement, half a second of grace), a sweep later at most.
                let waited = ContinuousClock.now - start
                #expect(waited >= .milliseconds(10_800))
                #expect(waited < .seconds(30), "answered only when the statement ended")
            }
        }
    }
}
