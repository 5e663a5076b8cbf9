import Accounts
import BookwormCore
import Catalog
import Foundation
import Logging
import Places
import PostgresNIO

/// A copy on offer, as the fan-out sees it.
struct OfferedCopy: Sendable {
    let id: UUID
    let owner: UUID
    let ownerName: String
    let title: String
    let book: UUID
    let condition: String
    let workKey: String
    let place: GeoPoint
}

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

    /// What the fan-out needs of a copy, read at the start of each batch; nil once the copy is
    /// not available any more (its next availability queues the job again), and nil when no one
    /// wishes for its work: most copies, an import's above all, then cost no fan-out statement.
    /// A wish committed after this read is not fanned out to here; its own job (`alerts.wish`)
    /// alerts it to the nearest copies on offer, as for a wish made a moment later.
    func offer(_ copy: UUID, on connection: PostgresConnection) async throws -> OfferedCopy? {
        for row in try await client.execute(OfferSQL(values: [.uuid(copy)]), on: connection, logger: logger) {
            var cells = RowCells(row)
            let offered = OfferedCopy(id: copy, owner: try cells.next(UUID.self), ownerName: try cells.next(String.self),
                                      title: try cells.next(String.self), book: try cells.next(UUID.self),
                                      condition: try cells.next(String.self), workKey: try cells.next(String.self),
                                      place: GeoPoint(latitude: try cells.next(Double.self), longitude: try cells.next(Double.self)))
            try cells.end()
            return offered
        }
        return nil
    }

    /// Which of `copies` `offer` would find, in one statement outside any transaction: the
    /// others (most of an import's) have nothing to fan out.
    func offered(_ copies: [UUID]) async throws -> Set<UUID> {
        Set(try await client.execute(OfferedSQL(values: [.uuidArray(copies)]), logger: logger).map { try $0.decode(UUID.self) })
    }

    /// One batch of the fan-out: the next `limit` wishes for the copy's work after `after` (by
    /// id, so each batch is one range of the work's index, planned for this work's size), of
    /// which those the copy satisfies get an alert. Public points only, both ends. Returns the
    /// last wish id examined (nil: none left) and the alerts written, with their wishers' mail
    /// details; an alert that exists already is not written again.
    func fanOut(_ copy: OfferedCopy, after: UUID?, limit: Int, now: Date, on connection: PostgresConnection) async throws -> (UUID?, [NewAlert]) {
        let start = after ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        let rows = try await connection.query("""
            WITH batch AS MATERIALIZED (
                SELECT w.id, w.user_id, w.book_id, w.any_edition, w.radius_km, w.pin_id, w.min_condition
                FROM wishes w WHERE w.work_key = \(copy.workKey) AND w.id > \(start)
                ORDER BY w.id LIMIT \(limit)
            ), matched AS (
                SELECT w.id AS wish_id, w.user_id, w.radius_km,
                       bookworm_distance_km(\(copy.place.latitude), \(copy.place.longitude), wp.public_latitude, wp.public_longitude) AS distance
                FROM batch w JOIN pins wp ON wp.id = \(unescaped: Self.placeOfWish)
                WHERE (w.any_edition OR w.book_id = \(copy.book))
                  AND w.user_id <> \(copy.owner)
                  AND \(unescaped: Visibility.ownerActive("w.user_id"))
                  AND (w.min_condition IS NULL
                       OR bookworm_condition_rank(\(copy.condition)) >= bookworm_condition_rank(w.min_condition))
                  AND NOT EXISTS (SELECT 1 FROM blocks bl
                                  WHERE (bl.blocker_id = w.user_id AND bl.blocked_id = \(copy.owner))
                                     OR (bl.blocker_id = \(copy.owner) AND bl.blocked_id = w.user_id))
            ), inserted AS (
                INSERT INTO alerts (wish_id, copy_id, user_id, distance_km, created_at)
                SELECT wish_id, \(copy.id), user_id, distance, \(now) FROM matched WHERE distance <= radius_km
                ON CONFLICT (wish_id, copy_id) DO NOTHING
                RETURNING id, user_id, distance_km
            )
            SELECT last.id, i.id, u.id, u.alerts, u.email, u.username, u.email_verified_at IS NOT NULL, i.distance_km
            FROM (SELECT id FROM batch ORDER BY id DESC LIMIT 1) last
                 LEFT JOIN (inserted i JOIN users u ON u.id = i.user_id) ON true
            """, logger: logger)
        var last: UUID?
        var written: [NewAlert] = []
        for try await row in rows.decode((UUID, UUID?, UUID?, String?, String?, String?, Bool?, Double?).self) {
            last = row.0
            if let id = row.1, let user = row.2, let preference = row.3, let email = row.4, let username = row.5 {
                written.append(NewAlert(id: id, user: user, preference: preference, email: email, username: username,
                                        verified: row.6 ?? false, title: copy.title, owner: copy.ownerName, distanceKm: row.7 ?? 0))
            }
        }
        return (last, written)
    }

    /// `user`'s wishes not yet looked at for copies already on offer (oldest first), marked as
    /// looked at in the caller's transaction.
    func takeUncheckedWishes(of user: UUID, on connection: PostgresConnection) async throws -> [UUID] {
        let rows = try await connection.query("""
            UPDATE wishes SET offers_checked = true WHERE user_id = \(user) AND NOT offers_checked
            RETURNING id, created_at
            """, logger: logger)
        var wishes: [(UUID, Date)] = []
        for try await row in rows.decode((UUID, Date).self) { wishes.append(row) }
        return wishes.sorted { $0.1 < $1.1 }.map(\.0)
    }

    /// A new wish's alerts: the `limit` nearest copies already on offer that satisfy it (the
    /// fan-out's rules, seen from the wish: its work or edition, condition, radius between
    /// public points, not the wisher's own, no block either way, neither side suspended),
    /// written unless they exist, with what their mail needs. None once the wish is gone; the
    /// wish row is share-locked, so a deletion waits for the alerts it will cascade to.
    func forNewWish(_ wish: UUID, limit: Int, now: Date, on connection: PostgresConnection) async throws -> [NewAlert] {
        let rows = try await connection.query("""
            WITH wish AS MATERIALIZED (
                SELECT w.id, w.user_id, w.book_id, w.any_edition, w.radius_km, w.min_condition, w.work_key,
                       wp.public_latitude AS latitude, wp.public_longitude AS longitude
                FROM wishes w JOIN pins wp ON wp.id = \(unescaped: Self.placeOfWish)
                WHERE w.id = \(wish) AND \(unescaped: Visibility.ownerActive("w.user_id"))
                FOR KEY SHARE OF w
            ), nearest AS (
                SELECT c.id AS copy_id, place.distance
                FROM wish
                JOIN books b ON b.work_key = wish.work_key AND (wish.any_edition OR b.id = wish.book_id)
                JOIN copies c ON c.book_id = b.id AND c.status = 'available' AND c.owner_id <> wish.user_id
                     AND \(unescaped: Visibility.shown("c", owner: "owner_id"))
                CROSS JOIN LATERAL (
                    SELECT bookworm_distance_km(wish.latitude, wish.longitude, p.public_latitude, p.public_longitude) AS distance
                    FROM pins p WHERE p.id = \(unescaped: Self.placeOf(copy: "c")) OFFSET 0
                ) place
                WHERE place.distance <= wish.radius_km
                  AND (wish.min_condition IS NULL
                       OR bookworm_condition_rank(c.condition) >= bookworm_condition_rank(wish.min_condition))
                  AND \(unescaped: BlocksStore.noBlockBetween("wish.user_id", "c.owner_id"))
                ORDER BY place.distance, c.id
                LIMIT \(limit)
            ), inserted AS (
                INSERT INTO alerts (wish_id, copy_id, user_id, distance_km, created_at)
                SELECT wish.id, nearest.copy_id, wish.user_id, nearest.distance, \(now) FROM wish CROSS JOIN nearest
                ON CONFLICT (wish_id, copy_id) DO NOTHING
                RETURNING id, user_id, copy_id, distance_km
            )
            SELECT i.id, u.id, u.alerts, u.email, u.username, u.email_verified_at IS NOT NULL, b.title, o.username, i.distance_km
            FROM inserted i JOIN users u ON u.id = i.user_id JOIN copies c ON c.id = i.copy_id
                 JOIN books b ON b.id = c.book_id JOIN users o ON o.id = c.owner_id
            ORDER BY i.distance_km, c.id
            """, logger: logger)
        var written: [NewAlert] = []
        for try await row in rows.decode((UUID, UUID, String, String, String, Bool, String, String, Double).self) {
            written.append(NewAlert(id: row.0, user: row.1, preference: row.2, email: row.3, username: row.4, verified: row.5,
                                    title: row.6, owner: row.7, distanceKm: row.8))
        }
        return written
    }

    func markMailed(_ alerts: [UUID], now: Date, on connection: PostgresConnection) async throws {
        guard !alerts.isEmpty else { return }
        try await connection.query("UPDATE alerts SET mailed_at = \(now) WHERE id = ANY(\(alerts))", logger: logger)
    }

    /// Users with alerts not mailed yet, after `after` (by id), for the daily digest.
    func usersAwaitingDigest(after: UUID?, limit: Int) async throws -> [UUID] {
        let start = after ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        let rows = try await client.query("""
            SELECT DISTINCT user_id FROM alerts WHERE mailed_at IS NULL AND user_id > \(start) ORDER BY user_id LIMIT \(limit)
            """, logger: logger)
        var users: [UUID] = []
        for try await user in rows.decode(UUID.self) { users.append(user) }
        return users
    }

    /// A user's alerts not mailed yet, locked for the digest, oldest first. Those whose copy went
    /// away (not available, now the wisher's, owner blocked either way) are returned as not
    /// `current`: they are marked, never mailed.
    func unmailed(user: UUID, on connection: PostgresConnection) async throws -> [(alert: NewAlert, current: Bool)] {
        let rows = try await connection.query("""
            SELECT a.id, u.id, u.alerts, u.email, u.username, u.email_verified_at IS NOT NULL, b.title, o.username, a.distance_km,
                   c.status = 'available' AND c.owner_id <> a.user_id
                   AND \(unescaped: BlocksStore.noBlockBetween("a.user_id", "c.owner_id"))
                   AND \(unescaped: Visibility.shown("c", owner: "owner_id"))
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
              AND \(unescaped: Visibility.shown("c", owner: "owner_id"))
              AND (\(after.map { Int($0.micros) })::int8 IS NULL
                   OR (a.created_at, a.id) < (timestamptz 'epoch' + \(after.map { Int($0.micros) }) * interval '1 microsecond', \(after?.id)))
            ORDER BY a.created_at DESC, a.id DESC
            LIMIT \(limit)
            """, logger: logger)
        var views: [AlertView] = []
        for try await row in rows {
            var cells = RowCells(row)
            let (id, distance, createdAt, micros) = (try cells.next(UUID.self), try cells.next(Double.self),
                                                     try cells.next(Date.self), try cells.next(Int64.self))
            let wish = try WishesStore.view(&cells)
            views.append(AlertView(id: id, wish: wish, copy: CopiesStore.view(try CopiesStore.row(&cells)),
                                   distanceKm: distance, createdAt: createdAt, createdMicros: micros))
            try cells.end()
        }
        return views
    }
}

/// `AlertsStore.offer`'s statement, run for every copy with wishes for its work, in each of its
/// fan-out's transactions. A lookup by primary key whose plan never depends on the copy: planned
/// anew it took 0.7 ms of PostgreSQL's time, prepared 0.05 ms (pgbench on 1,000,000 copies).
struct OfferSQL: PreparedSQL {
    static let name = "bookworm_alerts_offer"
    static let sql = offer(select: "c.owner_id, o.username, b.title, c.book_id, c.condition, b.work_key, p.public_latitude, p.public_longitude",
                           copies: "c.id = $1")
    static var bindingDataTypes: [PostgresDataType] { [.uuid] }
    let values: [SQLValue]

    /// The copies `copies` selects that are on offer, shown, and wished for.
    static func offer(select columns: String, copies: String) -> String {
        """
        SELECT \(columns)
        FROM copies c JOIN books b ON b.id = c.book_id JOIN users o ON o.id = c.owner_id
             JOIN pins p ON p.id = \(AlertsStore.placeOf(copy: "c"))
        WHERE \(copies) AND c.status = 'available' AND \(Visibility.shown("c", owner: "owner_id"))
          AND EXISTS (SELECT 1 FROM wishes w WHERE w.work_key = b.work_key)
        """
    }
}

/// `AlertsStore.offered`'s: `OfferSQL` for a claimed batch of copies at once, their ids only.
struct OfferedSQL: PreparedSQL {
    static let name = "bookworm_alerts_offered"
    static let sql = OfferSQL.offer(select: "c.id", copies: "c.id = ANY($1)")
    static var bindingDataTypes: [PostgresDataType] { [.uuidArray] }
    let values: [SQLValue]
}
