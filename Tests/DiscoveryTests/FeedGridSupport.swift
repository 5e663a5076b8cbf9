import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Places
@testable import Discovery
@testable import BookwormTestSupport

private let feedGridLogger = Logger(label: "feed-grid-test")

/// What the nearby feed's grid tests share: posts seeded at one pin, the posts a grid read's
/// generic plan touches, and the feed worked out pin by pin.
extension TestApp {
    /// A meetup pin at (`latitude`, `longitude`) with `count` offers, the newest `newest` seconds
    /// after noon on 2026-06-01 and each next one `step` seconds older.
    func postsAtOnePin(author: UUID, latitude: Double, longitude: Double = -0.15, count: Int, newest: Double,
                       step: Double) async throws {
        try await db.query("""
            WITH pin AS (
                INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude)
                VALUES (\(author), 'p', 'meetup', \(latitude), \(longitude), \(latitude), \(longitude)) RETURNING id)
            INSERT INTO posts (author_id, kind, body, pin_id, created_at)
            SELECT \(author), 'offer', 'x', pin.id, timestamptz '2026-06-01 12:00' + (\(newest) - i * \(step)) * interval '1 second'
            FROM pin CROSS JOIN generate_series(0, \(count) - 1) AS i
            """)
    }


    /// Posts (index entries or rows) the grid read's generic plan touches for one page.
    func postsReadOnGenericPlan(_ filter: FeedFilter, limit: Int, after: Cursor?) async throws -> Int {
        let (statement, grid) = PostsStore.listPlan(filter, limit: limit, after: after)
        #expect(grid != nil)
        let area = try #require(filter.near)
        let covering = try #require(FeedGrid.covering(area))
        let kindText: String = filter.kind.map { "'\($0.rawValue)'" } ?? "NULL"
        let micros: String = after.map { "\($0.micros)" } ?? "NULL"
        let id: String = after.map { "'\($0.id.uuidString)'" } ?? "NULL"
        func list(_ cells: [Int64]) -> String { "'{" + cells.map { String($0) }.joined(separator: ",") + "}'" }
        let band: [String] = PostsStore.bandValues(area).map { value in
            if case .double(let degrees?) = value { return "\(degrees)" }
            return "NULL"
        }
        let viewer = filter.viewerID.map { "'\($0.uuidString)'" } ?? "NULL"
        let arguments: [String] = [kindText, "NULL", "NULL", micros, id, "\(limit)", viewer, "\(area.origin.latitude)",
                                   "\(area.origin.longitude)", "\(area.radiusKm)", list(covering.inner)] + band + [list(covering.edge)]
        return try await db.withConnection { connection in
            try await connection.query("SET plan_cache_mode = force_generic_plan", logger: feedGridLogger)
            try await connection.query(PostgresQuery(unsafeSQL: """
                PREPARE grid_plan(text, text, uuid, int8, uuid, int8, uuid, float8, float8, float8, int8[],
                                  float8, float8, float8, float8, float8, float8, int8[]) AS \(statement.sql)
                """), logger: feedGridLogger)
            var plan = ""
            for try await text in try await connection.query(PostgresQuery(unsafeSQL: """
                EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE grid_plan(\(arguments.joined(separator: ", ")))
                """), logger: feedGridLogger).decode(String.self) { plan += text }
            try await connection.query("DEALLOCATE grid_plan", logger: feedGridLogger)
            try await connection.query("RESET plan_cache_mode", logger: feedGridLogger)
            return PlanRows.read("posts", in: try JSONSerialization.jsonObject(with: Data(plan.utf8)))
        }
    }

    /// Every post whose pin's public point is within the radius, measured pin by pin.
    func feedIDsByBruteForce(origin: GeoPoint, radiusKm: Double, kind: String?) async throws -> [String] {
        let rows = try await db.query("""
            SELECT po.id FROM posts po JOIN pins p ON p.id = po.pin_id
            WHERE bookworm_distance_km(\(origin.latitude), \(origin.longitude), p.public_latitude, p.public_longitude) <= \(radiusKm)
              AND (\(kind)::text IS NULL OR po.kind = \(kind))
            ORDER BY po.created_at DESC, po.id DESC
            """)
        var ids: [String] = []
        for try await id in rows.decode(UUID.self) { ids.append(id.apiString) }
        return ids
    }
}
