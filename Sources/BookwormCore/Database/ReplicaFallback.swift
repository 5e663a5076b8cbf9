import Foundation
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization

/// The primary behind a read replica, and whether the replica is resting after a failure.
package final class ReplicaFallback: Sendable {
    let primary: Database
    private let restingUntil = Mutex<ContinuousClock.Instant?>(nil)
    static let rest: Duration = .seconds(10)

    init(primary: Database) {
        self.primary = primary
    }

    var resting: Bool {
        restingUntil.withLock { until in
            guard let end = until else { return false }
            if ContinuousClock.now < end { return true }
            until = nil
            return false
        }
    }

    /// 40001: cancelled by a recovery conflict; 3D000: the database is not there yet.
    static func conflictsWithReplay(_ error: any Error) -> Bool {
        guard let state = ServerError.sqlState(of: error) else { return false }
        return state == "40001" || state == "3D000"
    }

    /// 42P01, 42703, 42883, 42704: a statement names a table, column, function or type the
    /// replica has not replayed yet (a migration has just run on the primary).
    static func behindOnSchema(_ error: any Error) -> Bool {
        guard let state = ServerError.sqlState(of: error) else { return false }
        return ["42P01", "42703", "42883", "42704"].contains(state)
    }

    func rest() {
        restingUntil.withLock { $0 = ContinuousClock.now + Self.rest }
    }

    /// `body` on one of `replica`'s connections, or on the primary's while the replica rests,
    /// is away, conflicts with what it replays, or has not replayed what the statement names.
    func read<T: Sendable>(on replica: Database, _ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        if resting { return try await primary.withConnection(body) }
        do {
            return try await replica.pooledConnection { connection in
                do {
                    return try await body(connection)
                } catch where Self.behindOnSchema(error) {
                    // PostgresNIO keeps a failed PREPARE for the connection's whole life
                    // (`PreparedStatementStateMachine`'s `.error`; `PreparedStatementMemoryTests`
                    // shows it): closed, the pool opens a new one that prepares again.
                    try? await connection.close()
                    throw error
                }
            }
        } catch where DatabaseOutage.matches(error) || Self.behindOnSchema(error) {
            // Away, or replaying a migration: it rests rather than failing (or losing a
            // connection) on every read meanwhile.
            rest()
            return try await primary.withConnection(body)
        } catch where Self.conflictsWithReplay(error) {
            // A replica cancels a read that conflicts with what it replays, or has not yet
            // replayed the database's creation; the primary answers this one, the next tries again.
            return try await primary.withConnection(body)
        }
    }
}

/// A second pool of the same database whose connections start with
/// `plan_cache_mode = force_generic_plan`, so a statement held to its generic plan costs one
/// round trip instead of `BEGIN`, `SET LOCAL`, the statement and `COMMIT`. It is split into one
/// pool per event loop, and a caller on a loop (a request's handler, `LoopExecutor`) uses that
/// loop's: the statement is written, its rows read and the caller resumed on one thread,
/// without waking another. A class, so that a `Database` can hold one (and a read replica's,
/// the primary's as its fallback).
package final class GenericPlanPool: Sendable {
    private let pools: [(loop: (any EventLoop)?, database: Database)]
    private let turn = Atomic<Int>(0)

    /// One pool for every caller.
    package init(_ database: Database) {
        pools = [(nil, database)]
    }

    package init(byLoop: [(loop: any EventLoop, database: Database)]) {
        pools = byLoop.map { (loop: $0.loop, database: $0.database) }
    }

    /// The pool of the caller's event loop; off the loops, or on a loop without one, each in turn.
    package var database: Database {
        if pools.count > 1, let loop = MultiThreadedEventLoopGroup.currentEventLoop,
           let pool = pools.first(where: { $0.loop === loop }) {
            return pool.database
        }
        return pools[turn.add(1, ordering: .relaxed).newValue % pools.count].database
    }

    /// This pool as a read replica's, each loop's falling back to `primary`'s of the same loop.
    package func readReplica(primary: GenericPlanPool) -> GenericPlanPool {
        GenericPlanPool(pools: zip(pools, primary.pools).map { replica, primary in
            (replica.loop, Database.readReplica(client: replica.database.client, primary: primary.database))
        })
    }

    private init(pools: [(loop: (any EventLoop)?, database: Database)]) {
        self.pools = pools
    }

    /// `total` connections (at least one) over `loops` loops, as evenly as they go: with fewer
    /// connections than loops, some loops get none and their callers use the others' in turn.
    package static func sizes(_ total: Int, loops: Int) -> [Int] {
        let total = max(1, total)
        return (0..<loops).map { total / loops + ($0 < total % loops ? 1 : 0) }
    }
}
