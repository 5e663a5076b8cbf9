import Accounts
import BookwormCore
import Catalog
import Foundation
import Logging
import Places
import PostgresNIO

/// Two-way partners. The query runs from both small ends: my wishes lead through the work index
/// to copies on offer near me (so only their owners are candidates), and only those candidates'
/// wishes are read against my own available copies. It never joins everyone's wishes with
/// everyone's copies. Distances are from my default pin's public point to the public point each
/// copy stands on.
package struct MatchesStore: Sendable {
    let client: Database
    let logger: Logger

    func origin(of user: UUID) async throws -> GeoPoint? {
        let rows = try await client.query("""
            SELECT public_latitude, public_longitude FROM pins WHERE owner_id = \(user) AND is_default
            """, logger: logger)
        for try await (lat, lon) in rows.decode((Double, Double).self) { return GeoPoint(latitude: lat, longitude: lon) }
        return nil
    }

    /// $1 me, $2/$3 my public point, $4 radius, $5 limit. Ranked by the smaller side (books that
    /// can go each way), then the total, then distance. The pin of each candidate copy is looked
    /// up by id (the `OFFSET 0` keeps that lookup per copy): a few hundred copies of the works I
    /// want cost less than every pin of a city. `mine` is materialised so it is built once, not
    /// once per partner.
    static let partnersSQL = """
        WITH my_wishes AS MATERIALIZED (
            SELECT w.work_key, w.book_id, w.any_edition, w.min_condition FROM wishes w WHERE w.user_id = $1
        ), my_copies AS MATERIALIZED (
            SELECT c.id, c.book_id, c.condition, b.work_key
            FROM copies c JOIN books b ON b.id = c.book_id
            WHERE c.owner_id = $1 AND c.status = 'available'
        ), they AS MATERIALIZED (
            SELECT DISTINCT ON (c.id) c.id AS copy_id, c.owner_id, place.distance
            FROM my_wishes mw
            JOIN books b ON b.work_key = mw.work_key AND (mw.any_edition OR b.id = mw.book_id)
            JOIN copies c ON c.book_id = b.id AND c.status = 'available' AND c.owner_id <> $1
                 AND \(Visibility.shown("c", owner: "owner_id"))
            CROSS JOIN LATERAL (
                SELECT bookworm_distance_km($2, $3, p.public_latitude, p.public_longitude) AS distance
                FROM pins p WHERE p.id = \(AlertsStore.placeOf(copy: "c")) OFFSET 0
            ) place
            WHERE (mw.min_condition IS NULL OR bookworm_condition_rank(c.condition) >= bookworm_condition_rank(mw.min_condition))
              AND place.distance <= $4
        ), partners AS MATERIALIZED (
            SELECT owner_id, min(distance) AS distance, array_agg(copy_id ORDER BY distance, copy_id) AS they_have
            FROM they
            WHERE \(BlocksStore.noBlockBetween("$1", "they.owner_id"))
            GROUP BY owner_id
        ), mine AS MATERIALIZED (
            SELECT pt.owner_id, array_agg(DISTINCT mc.id) AS i_have
            FROM partners pt
            JOIN wishes w ON w.user_id = pt.owner_id AND w.work_key IN (SELECT work_key FROM my_copies)
            JOIN my_copies mc ON mc.work_key = w.work_key AND (w.any_edition OR w.book_id = mc.book_id)
                 AND (w.min_condition IS NULL OR bookworm_condition_rank(mc.condition) >= bookworm_condition_rank(w.min_condition))
            GROUP BY pt.owner_id
        )
        SELECT pt.owner_id, pt.distance, pt.they_have, mine.i_have
        FROM partners pt JOIN mine ON mine.owner_id = pt.owner_id
        ORDER BY least(cardinality(pt.they_have), cardinality(mine.i_have)) DESC,
                 cardinality(pt.they_have) + cardinality(mine.i_have) DESC, pt.distance, pt.owner_id
        LIMIT $5
        """

    /// Rows of (partner, distance, their copy ids nearest first, my copy ids).
    package static func partnersStatement(of user: UUID, origin: GeoPoint, radiusKm: Double, limit: Int) -> SQLStatement {
        SQLStatement(sql: partnersSQL, values: [
            .uuid(user), .double(origin.latitude), .double(origin.longitude), .double(radiusKm), .int(limit),
        ])
    }

    func partners(of user: UUID, origin: GeoPoint, radiusKm: Double, limit: Int) async throws -> [MatchView] {
        let statement = Self.partnersStatement(of: user, origin: origin, radiusKm: radiusKm, limit: limit)
        var found: [(UUID, Double, [UUID], [UUID])] = []
        for row in try await client.execute(MatchesSQL(values: statement.values), logger: logger) {
            found.append(try row.decode((UUID, Double, [UUID], [UUID]).self))
        }
        guard !found.isEmpty else { return [] }
        let copies = try await views(found.flatMap { $0.2 + $0.3 })
        return found.compactMap { owner, distance, theirs, mine in
            guard let person = theirs.lazy.compactMap({ copies[$0]?.owner }).first else { return nil }
            return MatchView(user: person, distanceKm: distance,
                             theyHave: theirs.compactMap { copies[$0] },
                             iHave: mine.compactMap { copies[$0] }.sorted { $0.book.title < $1.book.title })
        }
    }

    private func views(_ ids: [UUID]) async throws -> [UUID: CopyView] {
        let rows = try await client.query("""
            SELECT \(unescaped: CopiesStore.columns) \(unescaped: CopiesStore.joins) WHERE c.id = ANY(\(ids))
            """, logger: logger)
        var views: [UUID: CopyView] = [:]
        for view in try CopiesStore.views(rows.rows) { views[view.id] = view }
        return views
    }
}

/// `MatchesStore.partnersSQL`, prepared: planning it cost a fifth of running it.
struct MatchesSQL: PreparedSQL {
    static let name = "bookworm_matches"
    static let sql = MatchesStore.partnersSQL
    let values: [SQLValue]
}
