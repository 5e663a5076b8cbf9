import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// What trades do to copies: reserve, release, hand over, lend and take back, and the journey
/// that records every change of owner. Runs on the caller's transaction, after the copies
/// were locked.
struct TradeCopiesStore: Sendable {
    let client: Database
    let logger: Logger

    /// One reservation row per copy: a second accepted trade on a copy fails here whatever the code did.
    func reserve(_ copies: [UUID], for trade: UUID, on connection: PostgresConnection) async throws {
        do {
            try await connection.query("""
                INSERT INTO copy_reservations (copy_id, trade_id) SELECT unnest(\(copies)::uuid[]), \(trade)
                """, logger: logger)
        } catch let error as PSQLError where error.sqlState == "23505" {
            throw AppError.conflict(code: "copy_unavailable", detail: "The copy is already promised in another trade", field: "copy_id")
        }
        try await connection.query("""
            UPDATE copies SET status = 'reserved', updated_at = clock_timestamp() WHERE id = ANY(\(copies))
            """, logger: logger)
    }

    func release(trade: UUID, on connection: PostgresConnection) async throws {
        try await connection.query("""
            WITH released AS (DELETE FROM copy_reservations WHERE trade_id = \(trade) RETURNING copy_id)
            UPDATE copies SET status = 'available', updated_at = clock_timestamp()
            WHERE id IN (SELECT copy_id FROM released) AND status = 'reserved'
            """, logger: logger)
    }

    /// A new owner: the copy is available again, on the new owner's default pin until they place it.
    func transfer(_ copy: UUID, from: UUID, to: UUID, kind: TradeKind, trade: UUID, at now: Date,
                  on connection: PostgresConnection) async throws {
        try await connection.query("""
            UPDATE copies SET owner_id = \(to), status = 'available', pin_id = NULL, updated_at = clock_timestamp()
            WHERE id = \(copy)
            """, logger: logger)
        try await connection.query("""
            INSERT INTO copy_transfers (copy_id, at, from_owner_id, to_owner_id, kind, trade_id)
            VALUES (\(copy), \(now), \(from), \(to), \(kind.rawValue), \(trade))
            """, logger: logger)
    }

    func lend(_ copy: UUID, trade: UUID, on connection: PostgresConnection) async throws {
        try await connection.query("DELETE FROM copy_reservations WHERE trade_id = \(trade)", logger: logger)
        try await connection.query("UPDATE copies SET status = 'lent', updated_at = clock_timestamp() WHERE id = \(copy)", logger: logger)
    }

    func takeBack(_ copy: UUID, on connection: PostgresConnection) async throws {
        try await connection.query("""
            UPDATE copies SET status = 'available', updated_at = clock_timestamp() WHERE id = \(copy) AND status = 'lent'
            """, logger: logger)
    }

    /// The owners over time, oldest first: whoever listed it, then one entry per change of owner.
    /// Nil when there is no such copy (or it is withdrawn and `viewer` is not its owner).
    func journey(_ copy: UUID, viewer: UUID?) async throws -> [JourneyStep]? {
        let rows = try await client.query("""
            WITH c AS (SELECT id, owner_id, status, created_at FROM copies WHERE id = \(copy)),
            first AS (SELECT from_owner_id FROM copy_transfers WHERE copy_id = \(copy) ORDER BY id LIMIT 1)
            SELECT u.username, c.created_at, 'listed', 0::int8 FROM c
                LEFT JOIN users u ON u.id = coalesce((SELECT from_owner_id FROM first), c.owner_id)
                WHERE c.status <> 'withdrawn' OR c.owner_id = \(viewer)
            UNION ALL
            SELECT u.username, ct.at, ct.kind, ct.id FROM copy_transfers ct
                JOIN c ON c.id = ct.copy_id LEFT JOIN users u ON u.id = ct.to_owner_id
                WHERE c.status <> 'withdrawn' OR c.owner_id = \(viewer)
            ORDER BY 4
            """, logger: logger)
        var steps: [JourneyStep] = []
        for try await (username, since, kind, _) in rows.decode((String?, Date, String, Int64).self) {
            steps.append(JourneyStep(username: username, since: since, kind: kind))
        }
        return steps.isEmpty ? nil : steps
    }
}
