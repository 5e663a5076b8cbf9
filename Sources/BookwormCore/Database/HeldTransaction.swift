import Logging
import PostgresNIO
import Synchronization

/// The one transaction of a write sent with an `Idempotency-Key` (`IdempotencyMiddleware`).
///
/// The request's first `Database.transaction` begins it, on a connection held for the rest of the
/// request; `claim` runs right after `BEGIN` (it takes the key's lock). Every later database
/// call of the request runs on that connection, a later transaction as a savepoint, so the
/// request reads its own writes. It commits only once the answer is known, with the answer
/// kept in it: a crash before the commit leaves neither the write nor the key, after it both.
/// Until the first transaction nothing is held, so a request's slow part before its write (a
/// photo being made, a body arriving) keeps no connection and no transaction open.
package final class HeldTransaction: Sendable {
    @TaskLocal package static var current: HeldTransaction?

    private let claim: @Sendable (PostgresConnection, Logger) async throws -> Void
    private struct Held {
        let connection: PostgresConnection
        let released: Gate
        let database: Database
    }
    private let held = Mutex<Held?>(nil)

    package init(claim: @escaping @Sendable (PostgresConnection, Logger) async throws -> Void) {
        self.claim = claim
    }

    /// The held connection, once the first transaction has begun.
    var connection: PostgresConnection? { held.withLock { $0?.connection } }
    /// Whether the request has written (its first transaction began and is still open).
    package var isOpen: Bool { connection != nil }

    /// `Database.transaction` inside a keyed request: the first begins the held transaction (an
    /// error in its body rolls all of it back, and nothing is held), a later one is a savepoint.
    func transaction<T: Sendable>(on database: Database, logger: Logger,
                                  _ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        // After work left behind, `onHeld` has closed the connection: what follows fails, and
        // nothing begins afresh on another (the request's earlier writes are gone with it).
        if let connection {
            return try await database.onHeld(connection) { connection in
                try await connection.query("SAVEPOINT bookworm_write", logger: logger)
                do {
                    let value = try await body(connection)
                    try await connection.query("RELEASE SAVEPOINT bookworm_write", logger: logger)
                    return value
                } catch {
                    _ = try? await connection.query("ROLLBACK TO SAVEPOINT bookworm_write", logger: logger)
                    throw error
                }
            }
        }
        let released = Gate()
        let connection: PostgresConnection
        do {
            connection = try await database.holdConnection(until: released)
        } catch {
            released.open()
            throw error
        }
        // Held from here, so that what the body calls without its connection runs in it too.
        held.withLock { $0 = Held(connection: connection, released: released, database: database) }
        do {
            let claim = claim
            return try await database.onHeld(connection) { connection in
                try await connection.query("BEGIN", logger: logger)
                try await claim(connection, logger)
                return try await body(connection)
            }
        } catch {
            held.withLock { $0 = nil }
            await Self.end(connection, on: database, after: error, logger: logger)
            released.open()
            throw error
        }
    }

    /// A call the deadline watch or a cancellation answered early: its statements may still be
    /// running on the connection, and a later one could land outside the transaction.
    static func leavesWorkBehind(_ error: any Error) -> Bool {
        error is DatabaseDeadlineExceeded || error is CancellationError || error is DatabaseConnectionClosed
    }

    /// Ends the transaction: `ROLLBACK` (under the statement deadline) when the failed call has
    /// finished, else the connection is closed (PostgreSQL rolls back, and nothing left running
    /// can write any more).
    static func end(_ connection: PostgresConnection, on database: Database, after error: (any Error)?, logger: Logger) async {
        if let error, !leavesWorkBehind(error), !connection.isClosed {
            let rolledBack = try? await database.onHeld(connection) { try await $0.query("ROLLBACK", logger: logger) }
            if rolledBack != nil { return }
        }
        try? await connection.close()
    }

    /// Runs `keep` in the held transaction and commits; on any failure rolls back. Either way the
    /// connection goes back to the pool. Does nothing when nothing was written.
    package func commit(on database: Database, logger: Logger,
                        keeping keep: @escaping @Sendable (PostgresConnection) async throws -> Void) async throws {
        guard let taken = held.withLock({ held -> Held? in defer { held = nil }; return held }) else { return }
        defer { taken.released.open() }
        do {
            try await database.onHeld(taken.connection) { connection in
                try await keep(connection)
                try await connection.query("COMMIT", logger: logger)
            }
        } catch {
            await Self.end(taken.connection, on: database, after: error, logger: logger)
            throw error
        }
    }

    /// Undoes whatever the request wrote by closing the held connection (the request may have
    /// failed in a call that left a statement running), and gives it back to the pool.
    package func rollback(logger: Logger) async {
        guard let taken = held.withLock({ held -> Held? in defer { held = nil }; return held }) else { return }
        defer { taken.released.open() }
        await Self.end(taken.connection, on: taken.database, after: nil, logger: logger)
    }
}

/// Hands the connection a lease task took to the caller waiting for it, once.
private final class Delivery: Sendable {
    private struct State {
        var waiter: CheckedContinuation<PostgresConnection, any Error>?
        var lease: Task<Void, Never>?
        var cancelled = false
    }
    private let state = Mutex(State())

    func start(_ waiter: CheckedContinuation<PostgresConnection, any Error>, lease: @escaping @Sendable () async -> Void) {
        state.withLock { $0.waiter = waiter }
        let task = Task { await lease() }
        // A cancellation that came first found no task to cancel.
        if state.withLock({ state in state.lease = task; return state.cancelled }) { task.cancel() }
    }

    func finish(_ result: Result<PostgresConnection, any Error>) {
        state.withLock { state -> CheckedContinuation<PostgresConnection, any Error>? in
            defer { state.waiter = nil }
            return state.waiter
        }?.resume(with: result)
    }

    func cancel() { state.withLock { state in state.cancelled = true; return state.lease }?.cancel() }
}

extension Database {
    /// A pooled connection, leased within the acquire deadline and kept until `released` opens.
    func holdConnection(until released: Gate) async throws -> PostgresConnection {
        try await withDeadlines { leased in
            let delivery = Delivery()
            let connection = try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<PostgresConnection, any Error>) in
                    delivery.start(continuation) {
                        // Counted in `/metrics` as any lease is, for as long as it is held.
                        let ticket = PoolUsage.Ticket(self.usage)
                        defer { ticket.done() }
                        do {
                            try await self.openConnection { connection in
                                ticket.leased()
                                defer { ticket.released() }
                                delivery.finish(.success(connection))
                                await released.wait()
                            }
                        } catch {
                            delivery.finish(.failure(error))
                        }
                    }
                }
            } onCancel: {
                delivery.cancel()
                released.open()
            }
            leased(connection)
            return connection
        }
    }

    /// `body` on the held connection, under the same deadlines as a pooled call.
    func onHeld<T: Sendable>(_ connection: PostgresConnection,
                             _ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        do {
            return try await withDeadlines { leased in
                leased(connection)
                return try await body(connection)
            }
        } catch where HeldTransaction.leavesWorkBehind(error) {
            // Answered early, with a statement perhaps still running: closing the connection ends
            // the transaction and stops anything that would follow it, in this request or another.
            try? await connection.close()
            throw error
        }
    }
}
