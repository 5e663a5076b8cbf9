import Foundation
import Logging
import PostgresNIO
import Synchronization

/// How long a database call may take before the caller hears "unavailable" instead of waiting.
package struct DatabaseDeadlines: Sendable {
    /// Waiting for a pooled connection. While PostgreSQL is away the pool retries in the
    /// background and a lease would otherwise wait for as long as the outage lasts.
    package var acquire: Duration = .seconds(2)
    /// One statement, enforced by the server (`statement_timeout`) and again by the caller.
    package var statement: Duration = .seconds(5)

    package init(acquire: Duration = .seconds(2), statement: Duration = .seconds(5)) {
        self.acquire = acquire
        self.statement = statement
    }

    var statementTimeoutMilliseconds: Int64 {
        let (seconds, attoseconds) = statement.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}

/// Thrown when a database call misses its deadline.
package struct DatabaseDeadlineExceeded: Error, CustomStringConvertible {
    /// Whether it got a connection (a slow statement) or not (no connection in time).
    package var leased: Bool
    package var description: String { leased ? "a database statement missed its deadline" : "no database connection in time" }
}

/// The pool every store and service talks to: `PostgresClient` with a deadline on every call, so
/// an outage turns into a quick 503 rather than requests piling up for as long as it lasts.
/// The deadlines run on the real clock: they bound waiting on I/O, not business time.
package struct Database: Sendable {
    package let client: PostgresClient
    package let deadlines: DatabaseDeadlines
    /// Connections in use and callers waiting, for `/metrics`.
    package let usage: PoolUsage
    /// Set when this is a read replica: where reads go while the replica is away.
    package let replicaOf: ReplicaFallback?
    /// A pool of the same database whose sessions plan every statement generically, for
    /// `executeOnGenericPlan` (see `GenericPlanPool`).
    package let genericPlans: GenericPlanPool?

    package init(client: PostgresClient, deadlines: DatabaseDeadlines = .init(), usage: PoolUsage = PoolUsage(),
                 replicaOf: ReplicaFallback? = nil, genericPlans: GenericPlanPool? = nil) {
        self.client = client
        self.deadlines = deadlines
        self.usage = usage
        self.replicaOf = replicaOf
        self.genericPlans = genericPlans
    }

    /// This database with `pool` for the statements held to their generic plans.
    package func withGenericPlans(_ pool: GenericPlanPool) -> Database {
        Database(client: client, deadlines: deadlines, usage: usage, replicaOf: replicaOf, genericPlans: pool)
    }

    /// A read replica (`DATABASE_READ_URL`) for the read-only search endpoints. It waits less
    /// for a connection than the primary does, and when it cannot serve (down, refusing,
    /// cancelled) the read runs on `primary` instead, and keeps doing so for a few seconds
    /// before the replica is tried again.
    package static func readReplica(client: PostgresClient, primary: Database) -> Database {
        var deadlines = primary.deadlines
        deadlines.acquire = min(deadlines.acquire, .milliseconds(500))
        return Database(client: client, deadlines: deadlines, replicaOf: ReplicaFallback(primary: primary))
    }

    /// Admin work (migrations, seeding, `VACUUM`): no statement deadline to speak of.
    package static func forAdministration(_ client: PostgresClient) -> Database {
        Database(client: client, deadlines: .init(acquire: .seconds(60), statement: .seconds(86_400)))
    }

    /// Runs `query` on a pooled connection and reads every row before the connection goes back.
    @discardableResult
    package func query(_ query: PostgresQuery, logger: Logger) async throws -> Rows {
        try await withConnection { connection in try await Rows(connection.query(query, logger: logger)) }
    }

    /// On `connection` when the caller is inside its own transaction, else on a pooled one.
    @discardableResult
    package func query(_ query: PostgresQuery, on connection: PostgresConnection?, logger: Logger) async throws -> Rows {
        if let connection { return try await Rows(connection.query(query, logger: logger)) }
        return try await self.query(query, logger: logger)
    }

    /// A statement whose rows are typed (`SessionLookupSQL`), decoded while the connection is leased.
    package func execute<Statement: PostgresPreparedStatement>(_ statement: Statement, logger: Logger)
        async throws -> [Statement.Row]
    {
        try await withConnection { connection in
            try await FailedPreparation.watching(connection, logger: logger) {
                var rows: [Statement.Row] = []
                for try await row in try await connection.execute(statement, logger: logger) { rows.append(row) }
                return Transfer(rows)
            }
        }.value
    }

    /// A `PreparedSQL` statement's rows. Its rows are `PostgresRow`s whatever the statement, so
    /// this overload reads them in a loop compiled for that one type: the generic loop above
    /// looked up the runtime's generic metadata for every row (1 % of a nearby page's CPU).
    package func execute<Statement: PreparedSQL>(_ statement: Statement, logger: Logger) async throws -> [PostgresRow] {
        try await withConnection { connection in try await Self.rows(of: statement, on: connection, logger: logger) }
    }

    /// On `connection` when the caller is inside its own transaction, else on a pooled one.
    package func execute<Statement: PreparedSQL>(_ statement: Statement, on connection: PostgresConnection?, logger: Logger)
        async throws -> [PostgresRow]
    {
        if let connection { return try await Self.rows(of: statement, on: connection, logger: logger) }
        return try await execute(statement, logger: logger)
    }

    private static func rows<Statement: PreparedSQL>(of statement: Statement, on connection: PostgresConnection, logger: Logger)
        async throws -> [PostgresRow]
    {
        // PostgresNIO's default name is `String(reflecting:)` of the type, built on every run.
        assert(Statement.name.hasPrefix("bookworm_"), "\(Statement.self) needs a static name")
        return try await FailedPreparation.watching(connection, logger: logger) {
            var rows: [PostgresRow] = []
            for try await row in try await connection.execute(statement, logger: logger) { rows.append(row) }
            return rows
        }
    }

    /// What `executeOnGenericPlan` runs first in its transaction (the benchmark's pgbench script too).
    package static let genericPlanSetting = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)"

    /// `execute` on the statement's generic plan, whatever PostgreSQL's cost model would pick:
    /// for a statement whose generic plan a test holds to be right and whose planning costs more
    /// than its run. Outside a transaction, on the `genericPlans` pool: one round trip. Else
    /// `SET LOCAL`, which needs a transaction: on `connection` the caller has one open, and
    /// without a generic pool the statement gets one of its own (three round trips more).
    package func executeOnGenericPlan<Statement: PreparedSQL>(
        _ statement: Statement, on connection: PostgresConnection?, logger: Logger) async throws -> [PostgresRow]
    {
        if connection == nil, let genericPlans { return try await genericPlans.database.execute(statement, logger: logger) }
        @Sendable func run(_ connection: PostgresConnection) async throws -> [PostgresRow] {
            try await connection.query(PostgresQuery(unsafeSQL: Self.genericPlanSetting), logger: logger)
            return try await Self.rows(of: statement, on: connection, logger: logger)
        }
        if let connection { return try await run(connection) }
        // Not forced there: `SET LOCAL` would hold for the rest of the request's transaction.
        if let held = HeldTransaction.current?.connection {
            return try await onHeld(held) { try await Self.rows(of: statement, on: $0, logger: logger) }
        }
        // By hand rather than `transaction`, so a read replica's fallback to the primary holds.
        return try await withConnection { connection in
            try await connection.query("BEGIN", logger: logger)
            do {
                let rows = try await run(connection)
                try await connection.query("COMMIT", logger: logger)
                return rows
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }

    /// Inside a keyed write that has begun writing, on its held connection (`HeldTransaction`).
    package func withConnection<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        if let held = HeldTransaction.current?.connection { return try await onHeld(held, body) }
        guard let fallback = replicaOf else { return try await pooledConnection(body) }
        return try await fallback.read(on: self, body)
    }

    func pooledConnection<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        let ticket = PoolUsage.Ticket(usage)
        defer { ticket.done() }
        return try await withDeadlines { leased in
            try await openConnection { connection in
                leased(connection)
                ticket.leased()
                defer { ticket.released() }
                return try await body(connection)
            }
        }
    }

    /// A pooled connection whose channel is still open. PostgresNIO's pool can hand out one that
    /// closed before the pool heard of it, and a statement on it never answers (PostgresNIO
    /// 1.33.2; `DeadConnectionTests`). So a closed one is given back unused and another taken
    /// after a pause, in which the pool hears of the close; still closed after
    /// `closedLeaseAttempts`, the call fails as an outage. `body` has not run then, so taking
    /// another is safe; a channel that closes just after this look is the deadline watch's. One
    /// that a failed preparation spoilt (`FailedPreparation`) is closed and another taken at
    /// once, without using up an attempt (the pool hears of that close before `close` returns).
    func openConnection<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await client.withConnection { connection in
                    if FailedPreparation.take(connection) {
                        usage.countReplacement()
                        try? await connection.close()
                        throw Spoilt()
                    }
                    guard !connection.isClosed else { throw ClosedBeforeUse() }
                    return try await body(connection)
                }
            } catch is Spoilt {
                // Each spoilt connection is taken once, so this ends.
                continue
            } catch is ClosedBeforeUse {
                // Only the guard throws this (a `body` that met a closed pool elsewhere throws
                // `DatabaseConnectionClosed`, and is never run twice).
                guard attempt < Self.closedLeaseAttempts else { throw DatabaseConnectionClosed() }
                try await Task.sleep(for: .milliseconds(5 * attempt))
                attempt += 1
            }
        }
    }

    private struct Spoilt: Error {}
    private struct ClosedBeforeUse: Error {}

    static let closedLeaseAttempts = 5

    /// `withTransaction` that lets the closure's own error through unwrapped, so an `AppError`
    /// thrown inside a transaction still reaches the client as itself. A transaction PostgreSQL
    /// ended to break a deadlock or a serialization failure (`TransactionConflict`) changed
    /// nothing, and runs again, up to `conflictAttempts` times in all: row locks are taken in
    /// a fixed order where the code can choose it, but two transactions' statements can still
    /// meet in opposite orders. So `body` must do nothing outside the database that it cannot
    /// do twice.
    package func transaction<T: Sendable>(logger: Logger, _ body: @escaping @Sendable (PostgresConnection) async throws -> T)
        async throws -> T
    {
        var attempt = 1
        while true {
            do {
                if let held = HeldTransaction.current { return try await held.transaction(on: self, logger: logger, body) }
                return try await transactionOnce(logger: logger, body)
            } catch where attempt < Self.conflictAttempts && TransactionConflict.matches(error) {
                logger.info("transaction ended by a conflict; running it again",
                            metadata: ["attempt": .stringConvertible(attempt), "error": .string(String(reflecting: error))])
                attempt += 1
            }
        }
    }

    package static let conflictAttempts = 3

    private func transactionOnce<T: Sendable>(logger: Logger, _ body: @escaping @Sendable (PostgresConnection) async throws -> T)
        async throws -> T
    {
        let ticket = PoolUsage.Ticket(usage)
        defer { ticket.done() }
        return try await withDeadlines { leased in
            do {
                return try await openConnection { connection in
                    // Leased before `BEGIN`, so the watch sees that statement's connection too.
                    leased(connection)
                    ticket.leased()
                    defer { ticket.released() }
                    return try await connection.withTransaction(logger: logger) { connection in try await body(connection) }
                }
            } catch let error as PostgresTransactionError {
                if let inner = error.closureError { throw inner }
                throw error
            }
        }
    }

    /// Runs `operation` in a task of its own and stops waiting for it when it has no connection
    /// by the acquire deadline, or has not finished a statement's time after that, or when its
    /// connection closes under it. The caller is answered then whatever the operation is stuck in;
    /// the operation is cancelled (a waiting lease is withdrawn from the pool, the server's
    /// statement timeout ends a statement). A statement PostgresNIO wrote to a channel that
    /// closed meanwhile never answers (see `openConnection`), and that task is left behind.
    func withDeadlines<T: Sendable>(
        _ operation: @escaping @Sendable (_ leased: @escaping @Sendable (PostgresConnection) -> Void) async throws -> T
    ) async throws -> T {
        let lease = LeasedConnection()
        let acquireBy = ContinuousClock.now + deadlines.acquire
        let statementBy = acquireBy + deadlines.statement + .milliseconds(500)
        let race = Race<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let watch = DeadlineWatch.shared.add(
                    isDue: { now in lease.connection.map { now >= statementBy || $0.isClosed } ?? (now >= acquireBy) },
                    fire: { race.finish(.failure(lease.failure)) })
                // On the caller's event loop, if it runs on one: the reply then resumes it there.
                let work = Task<Void, any Error>(executorPreference: LoopExecutor.current) {
                    race.finish(await Result(catching: { try await operation { lease.set($0) } }))
                }
                race.start(continuation, work: work, watch: watch)
            }
        } onCancel: {
            race.finish(.failure(CancellationError()))
        }
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
