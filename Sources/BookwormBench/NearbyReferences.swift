import BookwormCore
import Catalog
import Discovery
import Foundation
import PostgresNIO

/// The references the nearby benchmark compares the project with, as a skilled PostGIS user
/// would write them: prepared, the `<->` nearest-neighbour order kept down to the `LIMIT` (the
/// planner's incremental sort stops at the page), and the page's details joined last.
enum NearbyReferences {
    /// Best-practice PostGIS: geography + GiST, `ST_DWithin` and `ORDER BY geog <-> point` in the
    /// pins' subquery, so the index yields pins nearest first and the sort by (distance, copy id)
    /// is incremental (the outer sort key must be that very `<->` expression, in metres: sorting
    /// by kilometres made it a full sort of every pin in the radius). Copies hidden by reports
    /// are left out, as the product must, which lets it read the same partial indexes. $1 latitude, $2 longitude, $3 radius km, $4 limit, $5 caller.
    struct PostGIS: PreparedSQL {
        static let origin = "ST_SetSRID(ST_MakePoint($2, $1), 4326)::geography"
        static let sql = """
            SELECT c.id, page.meters / 1000, \(CopiesStore.columns) FROM (
                SELECT placed.copy_id, near.meters FROM (
                    SELECT g.id, g.owner_id, g.is_default, g.geog <-> \(origin) AS meters
                    FROM bench_pin_geog g
                    WHERE ST_DWithin(g.geog, \(origin), $3 * 1000, false) AND g.owner_id <> $5
                    ORDER BY g.geog <-> \(origin)
                ) near
                CROSS JOIN LATERAL (
                    SELECT c.id AS copy_id FROM copies c WHERE c.pin_id = near.id AND c.status = 'available' AND c.hidden_at IS NULL
                    UNION ALL
                    SELECT c.id FROM copies c
                    WHERE near.is_default AND c.owner_id = near.owner_id AND c.pin_id IS NULL AND c.status = 'available'
                      AND c.hidden_at IS NULL
                ) placed
                ORDER BY near.meters, placed.copy_id
                LIMIT $4
            ) page
            JOIN copies c ON c.id = page.copy_id JOIN books b ON b.id = c.book_id JOIN users u ON u.id = c.owner_id
            ORDER BY page.meters, c.id
            """
        let values: [SQLValue]

        init(latitude: Double, longitude: Double, radiusKm: Double, limit: Int, caller: UUID) {
            values = [.double(latitude), .double(longitude), .double(radiusKm), .int(limit), .uuid(caller)]
        }
    }

    /// The reference with its values written in, as a pgbench script prepares it: a prepared
    /// statement without parameters is planned with the point itself. Given parameters, the
    /// server switches to a generic plan after five runs, and for this statement that plan
    /// sorts every pin in the radius (40 ms instead of 0.6); a skilled user would not let it.
    static func literalPostGIS(latitude: Double, longitude: Double, radiusKm: Double, limit: Int, caller: UUID) -> String {
        var sql = PostGIS.sql
        for (parameter, value) in [("$5", "'\(caller.uuidString)'::uuid"), ("$4", "\(limit)"), ("$3", "\(radiusKm)::float8"),
                                   ("$2", "\(longitude)::float8"), ("$1", "\(latitude)::float8")] {
            sql = sql.replacingOccurrences(of: parameter, with: value)
        }
        return sql
    }

    /// Prepares `sql` (no parameters), runs it once to plan and warm it, then times one more
    /// run: execution only, as pgbench `-M prepared` measures a script run many times.
    static func timePrepared(_ sql: String, on connection: PostgresConnection) async throws -> (Double, [PostgresRow]) {
        try await connection.query(PostgresQuery(unsafeSQL: "PREPARE bench_reference AS " + sql), logger: connection.logger)
        for try await _ in try await connection.query(PostgresQuery(unsafeSQL: "EXECUTE bench_reference"), logger: connection.logger) {}
        var rows: [PostgresRow] = []
        let elapsed = try await ContinuousClock().measure {
            let sequence = try await connection.query(PostgresQuery(unsafeSQL: "EXECUTE bench_reference"), logger: connection.logger)
            for try await row in sequence { rows.append(row) }
        }
        try await connection.query(PostgresQuery(unsafeSQL: "DEALLOCATE bench_reference"), logger: connection.logger)
        return (elapsed.milliseconds, rows)
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

    /// The project's statement timed as the references are (prepared, raw rows on one
    /// connection, nothing decoded past the keys), in the server's rounds: the 32 nearest pins,
    /// then 256, … until the page is provably complete. Returns (milliseconds, copy ids, rounds).
    static func timeProject(_ query: NearbyQuery, limit: Int, on connection: PostgresConnection) async throws -> (Double, [UUID], Int) {
        var ids: [UUID] = []
        var rounds = 0
        let elapsed = try await ContinuousClock().measure {
            var pinLimit = NearbyStore.firstPinLimit
            while true {
                let statement = NearbyStore.copiesStatement(query, after: nil, limit: limit, pinLimit: pinLimit)
                var boundary: Double?, lastChord: Double?
                ids = []
                rounds += 1
                for try await row in try await connection.execute(NearbyCopiesSQL(values: statement.values), logger: connection.logger) {
                    let cells = PostgresRandomAccessRow(row)
                    boundary = try cells[0].decode(Double?.self)
                    guard let chord = try cells[1].decode(Double?.self) else { continue }
                    lastChord = chord
                    ids.append(try cells[5].decode(UUID.self))
                }
                if NearbyStore.isComplete(boundary: boundary, rows: ids.count, lastChord: lastChord, limit: limit) { break }
                pinLimit *= 8
            }
        }
        return (elapsed.milliseconds, ids, rounds)
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
