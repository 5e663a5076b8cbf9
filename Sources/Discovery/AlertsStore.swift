import Accounts
import BookwormCore
import Catalog
import Foundation
import Logging
import PostgresNIO

/// An alert just written, with what its mail needs.
struct NewAlert: Sendable {
    let id: UUID
    let user: UUID
    let preference: String
    let email: String
    let username: String
    let verified: Bool
    let title: String
    let owner: String
    let distanceKm: Double
}

/// SQL for alerts: the fan-out that writes them, the list, and the digest's selection.
struct AlertsStore: Sendable {
    let client: Database
    let logger: Logger

    /// The pin a copy stands on: its own, else its owner's default pin (`coalesce` evaluates the
    /// subquery only when needed).
    static func placeOf(copy c: String) -> String {
        "coalesce(\(c).pin_id, (SELECT d.id FROM pins d WHERE d.owner_id = \(c).owner_id AND d.is_default))"
    }

    /// The pin a wish is measured from: its own, else the wisher's default pin.
    static let placeOfWish = "coalesce(w.pin_id, (SELECT d.id FROM pins d WHERE d.owner_id = w.user_id AND d.is_default))"

    /// One batch of the fan-out for a copy: the next `limit` wishes for its work after `after`
    /// (by id), of which those it satisfies get an alert. Public points only, both ends. Returns
    /// the last wish id examined (nil: no wishes left, or the copy is not available any more) and
    /// the alerts written; an alert that exists already is not written again.
    func fanOut(copy: UUID, after: UUID?, limit: Int, now: Date, on connection: PostgresConnection) async throws -> (UUID?, [UUID]) {
        let rows = try await connection.query("""
            WITH copy AS MATERIALIZED (
                SELECT c.id, c.owner_id, c.book_id, c.condition, b.work_key, p.public_latitude AS lat, p.public_longitude AS lon
                FROM copies c JOIN books b ON b.id = c.book_id JOIN pins p ON p.id = \(unescaped: Self.placeOf(copy: "c"))
                WHERE c.id = \(copy) AND c.status = 'available'
            ), batch AS MATERIALIZED (
                SELECT w.* FROM copy JOIN wishes w ON w.work_key = copy.work_key
                WHERE \(after)::uuid IS NULL OR w.id > \(after)
                ORDER BY w.id LIMIT \(limit)
            ), matched AS (
                SELECT w.id AS wish_id, w.user_id, w.radius_km,
                       bookworm_distance_km(copy.lat, copy.lon, wp.public_latitude, wp.public_longitude) AS distance
                FROM batch w CROSS JOIN copy JOIN pins wp ON wp.id = \(unescaped: Self.placeOfWish)
                WHERE (w.any_edition OR w.book_id = copy.book_id)
                  AND w.user_id <> copy.owner_id
                  AND (w.min_condition IS NULL
                       OR bookworm_condition_rank(copy.condition) >= bookworm_condition_rank(w.min_condition))
                  AND \(unescaped: BlocksStore.noBlockBetween("w.user_id", "copy.owner_id"))
            ), inserted AS (
                INSERT INTO alerts (wish_id, copy_id, user_id, distance_km, created_at)
                SELECT matched.wish_id, copy.id, matched.user_id, matched.distance, \(now)
                FROM matched CROSS JOIN copy WHERE matched.distance <= matched.radius_km
                ON CONFLICT (wish_id, copy_id) DO NOTHING
                RETURNING id
            )
            SELECT last.id, inserted.id
            FROM (SELECT id FROM batch ORDER BY id DESC LIMIT 1) last LEFT JOIN inserted ON true
            """, logger: logger)
        var last: UUID?
        var written: [UUID] = []
        for try await (batchEnd, alert) in rows.decode((UUID, UUID?).self) {
            last = batchEnd
            if let alert { written.append(alert) }
        }
        return (last, written)
    }

    /// The alerts with their wisher's preference and address, for mailing.
    func details(_ alerts: [UUID], on connection: PostgresConnection) async throws -> [NewAlert] {
        let rows = try await connection.query("""
            SELECT a.id, u.id, u.alerts, u.email, u.username, u.email_verified_at IS NOT NULL, b.title, o.username, a.distance_km
            FROM alerts a JOIN users u ON u.id = a.user_id JOIN copies c ON c.id = a.copy_id
                 JOIN books b ON b.id = c.book_id JOIN users o ON o.id = c.owner_id
            WHERE a.id = ANY(\(alerts))
            ORDER BY a.user_id, b.title
            """, logger: logger)
        var found: [NewAlert] = []
        for try await row in rows.decode((UUID, UUID, String, String, String, Bool, String, String, Double).self) {
            found.append(NewAlert(id: row.0, user: row.1, preference: row.2, email: row.3, username: row.4, verified: row.5,
                                  title: row.6, owner: row.7, distanceKm: row.8))
        }
        return found
    }

    func markMailed(_ alerts: [UUID], now: Date, on connection: PostgresConnection) async throws {
        guard !alerts.isEmpty else { return }
        try await connection.query("UPDATE alerts SET mailed_at = \(now) WHERE id = ANY(\(alerts))", logger: logger)
    }

    /// A user's alerts not mailed yet, locked for the digest, oldest first. Those whose copy went
    /// away (not available, now the wisher's, owner blocked either way) are returned as not
    /// `current`: they are marked, never mailed.
    func unmailed(user: UUID, on connection: PostgresConnection) async throws -> [(alert: NewAlert, current: Bool)] {
        let rows = try await connection.query("""
            SELECT a.id, u.id, u.alerts, u.email, u.username, u.email_verified_at IS NOT NULL, b.title, o.username, a.distance_km,
                   c.status = 'available' AND c.owner_id <> a.user_id
                   AND \(unescaped: BlocksStore.noBlockBetween("a.user_id", "c.owner_id"))
            FROM alerts a JOIN users u ON u.id = a.user_id JOIN copies c ON c.id = a.copy_id
                 JOIN books b ON b.id = c.book_id JOIN users o ON o.id = c.owner_id
            WHERE a.user_id = \(user) AND a.mailed_at IS NULL
            ORDER BY a.created_at, a.id
            FOR UPDATE OF a
            """, logger: logger)
        var found: [(NewAlert, Bool)] = []
        for try await row in rows.decode((UUID, UUID, String, String, String, Bool, String, String, Double, Bool).self) {
            found.append((NewAlert(id: row.0, user: row.1, preference: row.2, email: row.3, username: row.4, verified: row.5,
                                   title: row.6, owner: row.7, distanceKm: row.8), row.9))
        }
        return found
    }

    /// My alerts, newest first, for copies still on offer to me: a copy that was withdrawn,
    /// deleted, traded away or is now mine, and an owner blocked either way, drop out.
    func list(user: UUID, after: Cursor?, limit: Int) async throws -> [AlertView] {
        let rows = try await client.query("""
            SELECT a.id, a.distance_km, a.created_at, (EXTRACT(EPOCH FROM a.created_at) * 1000000)::int8,
                   \(unescaped: WishesStore.columns(book: "wb")), \(unescaped: CopiesStore.columns)
            FROM alerts a JOIN wishes w ON w.id = a.wish_id JOIN books wb ON wb.id = w.book_id
                 JOIN copies c ON c.id = a.copy_id JOIN books b ON b.id = c.book_id JOIN users u ON u.id = c.owner_id
            WHERE a.user_id = \(user) AND c.status = 'available' AND c.owner_id <> a.user_id
              AND \(unescaped: BlocksStore.noBlockBetween("a.user_id", "c.owner_id"))
              AND (\(after.map { Int($0.micros) })::int8 IS NULL
                   OR (a.created_at, a.id) < (timestamptz 'epoch' + \(after.map { Int($0.micros) }) * interval '1 microsecond', \(after?.id)))
            ORDER BY a.created_at DESC, a.id DESC
            LIMIT \(limit)
            """, logger: logger)
        var views: [AlertView] = []
        for try await row in rows {
            let cells = row.makeRandomAccess()
            views.append(AlertView(id: try cells[0].decode(UUID.self),
                                   wish: try WishesStore.view(cells, from: 4),
                                   copy: CopiesStore.view(try CopiesStore.row(cells, from: 4 + WishesStore.columnCount)),
                                   distanceKm: try cells[1].decode(Double.self), createdAt: try cells[2].decode(Date.self),
                                   createdMicros: try cells[3].decode(Int64.self)))
        }
        return views
    }
}
