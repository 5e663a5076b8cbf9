import BookwormCore
import Catalog
import Foundation
import Logging
import PostgresNIO

/// SQL for wishes: one per user and book.
struct WishesStore: Sendable {
    let client: Database
    let logger: Logger

    /// A wish's columns, its book joined as `book` (statements that also join a copy's book
    /// name the wish's another way).
    static func columns(book b: String = "b") -> String {
        """
        w.id, \(b).id, \(b).isbn13, \(b).title, \(b).authors, w.any_edition, w.radius_km, w.pin_id, w.min_condition, w.created_at,
        (EXTRACT(EPOCH FROM w.created_at) * 1000000)::int8
        """
    }

    /// Locks the wisher's row, so the count and the insert that follows cannot interleave with
    /// another request's: the limit holds for parallel requests.
    func lockAndCount(user: UUID, on connection: PostgresConnection) async throws -> Int {
        try await connection.query("SELECT 1 FROM users WHERE id = \(user) FOR UPDATE", logger: logger)
        let rows = try await connection.query("SELECT count(*)::int8 FROM wishes WHERE user_id = \(user)", logger: logger)
        for try await count in rows.decode(Int64.self) { return Int(count) }
        return 0
    }

    func hasDefaultPin(user: UUID, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query("SELECT 1 FROM pins WHERE owner_id = \(user) AND is_default", logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Nil when the user wishes for this book already (the unique key decides, under races too).
    func insert(user: UUID, book: UUID, _ wish: NewWish, now: Date, on connection: PostgresConnection) async throws -> UUID? {
        let rows = try await connection.query("""
            INSERT INTO wishes (id, user_id, book_id, work_key, any_edition, radius_km, pin_id, min_condition, created_at)
            SELECT coalesce(\(wish.id), gen_random_uuid()), \(user), b.id, b.work_key, \(wish.anyEdition), \(wish.radiusKm), \(wish.pinID),
                   \(wish.minCondition?.rawValue), \(now)
            FROM books b WHERE b.id = \(book)
            ON CONFLICT DO NOTHING
            RETURNING id
            """, logger: logger)
        for try await id in rows.decode(UUID.self) { return id }
        return nil
    }

    /// Nil when no wish has `id`; else whether it is `user`'s for `book` with the settings of
    /// `wish` (its pin only where the request names one).
    func isSame(_ id: UUID, user: UUID, book: UUID, _ wish: NewWish, on connection: PostgresConnection) async throws -> Bool? {
        let rows = try await connection.query("""
            SELECT user_id = \(user) AND book_id = \(book) AND any_edition = \(wish.anyEdition) AND radius_km = \(wish.radiusKm)
                   AND min_condition IS NOT DISTINCT FROM \(wish.minCondition?.rawValue)
                   AND (\(wish.pinID)::uuid IS NULL OR pin_id = \(wish.pinID))
            FROM wishes WHERE id = \(id)
            """, logger: logger)
        for try await same in rows.decode(Bool.self) { return same }
        return nil
    }

    func get(_ id: UUID, user: UUID, on connection: PostgresConnection? = nil) async throws -> WishView? {
        try await Self.views(client.query("""
            SELECT \(unescaped: Self.columns()) FROM wishes w JOIN books b ON b.id = w.book_id
            WHERE w.id = \(id) AND w.user_id = \(user)
            """, on: connection, logger: logger)).first
    }

    /// The wishes of `user` among `ids` (delta sync).
    func owned(_ ids: [UUID], user: UUID) async throws -> [UUID: WishView] {
        guard !ids.isEmpty else { return [:] }
        let views = try await Self.views(client.query("""
            SELECT \(unescaped: Self.columns()) FROM wishes w JOIN books b ON b.id = w.book_id
            WHERE w.id = ANY(\(ids)) AND w.user_id = \(user)
            """, logger: logger))
        return Dictionary(views.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    func delete(_ id: UUID, user: UUID, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await client.query("DELETE FROM wishes WHERE id = \(id) AND user_id = \(user) RETURNING 1", on: connection,
                                          logger: logger)
        return rows.rows.count > 0
    }

    /// Newest first, keyset-paginated.
    func list(user: UUID, after: Cursor?, limit: Int) async throws -> [WishView] {
        try await Self.views(client.query("""
            SELECT \(unescaped: Self.columns()) FROM wishes w JOIN books b ON b.id = w.book_id
            WHERE w.user_id = \(user)
              AND (\(after.map { Int($0.micros) })::int8 IS NULL
                   OR (w.created_at, w.id) < (timestamptz 'epoch' + \(after.map { Int($0.micros) }) * interval '1 microsecond', \(after?.id)))
            ORDER BY w.created_at DESC, w.id DESC
            LIMIT \(limit)
            """, logger: logger))
    }

    static func view(_ cells: inout RowCells) throws -> WishView {
        WishView(id: try cells.next(UUID.self),
                 book: BookSummary(id: try cells.next(UUID.self), isbn13: try cells.next(String?.self),
                                   title: try cells.next(String.self), authors: try cells.next([String].self)),
                 anyEdition: try cells.next(Bool.self), radiusKm: try cells.next(Double.self),
                 pinID: try cells.next(UUID?.self), minCondition: try cells.next(String?.self),
                 createdAt: try cells.next(Date.self), createdMicros: try cells.next(Int64.self))
    }

    private static func views(_ rows: Rows) async throws -> [WishView] {
        var views: [WishView] = []
        for try await row in rows {
            var cells = RowCells(row)
            views.append(try view(&cells))
            try cells.end()
        }
        return views
    }
}
