import BookwormCore
import Foundation
import PostgresNIO

/// The references the nearby benchmark compares the project with, as a skilled PostGIS user
/// would write them: prepared, the `<->` nearest-neighbour order kept down to the `LIMIT` (the
/// planner's incremental sort stops at the page), and the page's details joined last.
enum NearbyReferences {
    /// Best-practice PostGIS: geography + GiST, `ST_DWithin` and `ORDER BY geog <-> point` in the
    /// pins' subquery, so the index yields pins nearest first and the sort by (distance, copy id)
    /// is incremental. $1 latitude, $2 longitude, $3 radius km, $4 limit, $5 caller.
    struct PostGIS: PreparedSQL {
        static let origin = "ST_SetSRID(ST_MakePoint($2, $1), 4326)::geography"
        static let sql = """
            SELECT c.id, page.distance FROM (
                SELECT placed.copy_id, near.distance FROM (
                    SELECT g.id, g.owner_id, g.is_default, (g.geog <-> \(origin)) / 1000 AS distance
                    FROM bench_pin_geog g
                    WHERE ST_DWithin(g.geog, \(origin), $3 * 1000, false) AND g.owner_id <> $5
                    ORDER BY g.geog <-> \(origin)
                ) near
                CROSS JOIN LATERAL (
                    SELECT c.id AS copy_id FROM copies c WHERE c.pin_id = near.id AND c.status = 'available'
                    UNION ALL
                    SELECT c.id FROM copies c
                    WHERE near.is_default AND c.owner_id = near.owner_id AND c.pin_id IS NULL AND c.status = 'available'
                ) placed
                ORDER BY near.distance, placed.copy_id
                LIMIT $4
            ) page
            JOIN copies c ON c.id = page.copy_id JOIN books b ON b.id = c.book_id JOIN users u ON u.id = c.owner_id
            ORDER BY page.distance, c.id
            """
        let values: [SQLValue]

        init(latitude: Double, longitude: Double, radiusKm: Double, limit: Int, caller: UUID) {
            values = [.double(latitude), .double(longitude), .double(radiusKm), .int(limit), .uuid(caller)]
        }
    }

    /// The floor: the 50 nearest pins and nothing else, by the project's cube index.
    /// $1–$3 the origin on the unit sphere, $4 limit.
    struct CubeFloor: PreparedSQL {
        static let sql = "SELECT id FROM pins ORDER BY public_xyz <-> cube(ARRAY[$1, $2, $3]::float8[]) LIMIT $4"
        let values: [SQLValue]

        init(latitude: Double, longitude: Double, limit: Int) {
            let lat = latitude * .pi / 180, lon = longitude * .pi / 180
            values = [.double(cos(lat) * cos(lon)), .double(cos(lat) * sin(lon)), .double(sin(lat)), .int(limit)]
        }
    }

    /// The floor by PostGIS: the 50 nearest pins by the geography index.
    struct PostGISFloor: PreparedSQL {
        static let sql = "SELECT id FROM bench_pin_geog ORDER BY geog <-> ST_SetSRID(ST_MakePoint($2, $1), 4326)::geography LIMIT $3"
        let values: [SQLValue]

        init(latitude: Double, longitude: Double, limit: Int) {
            values = [.double(latitude), .double(longitude), .int(limit)]
        }
    }

    /// One prepared execution on `connection`: (milliseconds, rows).
    static func time<Statement: PreparedSQL>(_ statement: Statement, on connection: PostgresConnection) async throws
        -> (Double, [PostgresRow])
    {
        var rows: [PostgresRow] = []
        let elapsed = try await ContinuousClock().measure {
            for try await row in try await connection.execute(statement, logger: connection.logger) { rows.append(row) }
        }
        return (elapsed.milliseconds, rows)
    }
}
