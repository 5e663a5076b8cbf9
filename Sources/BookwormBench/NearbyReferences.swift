import Accounts
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
    /// by kilometres made it a full sort of every pin in the radius). It keeps the product's
    /// rules, so that it answers the same question: copies hidden by reports (which lets it read
    /// the same partial indexes) and suspended owners' copies are left out, and owners blocked
    /// either way (the same SQL as the product's, `Visibility` and `BlocksStore.noBlockByProbes`,
    /// which ran faster for it too: 0.31–0.32 ms at central London against 0.33–0.41 ms with
    /// the blocks as one anti-join; the owners' reference keeps the anti-join, which its plan
    /// needs: with the probes it read the whole radius, 45 ms at p50 against 1.07).
    /// $1 latitude, $2 longitude, $3 radius km, $4 limit, $5 caller.
    struct PostGIS: PreparedSQL {
        static let name = "bookworm_bench_postgis"
        static let origin = "ST_SetSRID(ST_MakePoint($2, $1), 4326)::geography"
        /// Pins in the radius, not the caller's nor blocked either way (`blocks`), nearest first by
        /// the GiST index.
        static let nearestPins = nearestPins(blocks: BlocksStore.noBlockByProbes("$5", "g.owner_id"))
        static func nearestPins(blocks: String) -> String {
            """
            SELECT g.id, g.owner_id, g.is_default, g.geog <-> \(origin) AS meters
                    FROM bench_pin_geog g
                    WHERE ST_DWithin(g.geog, \(origin), $3 * 1000, false) AND g.owner_id <> $5
                      AND \(blocks)
                    ORDER BY g.geog <-> \(origin)
            """
        }
        /// The shown available copies `pin` places: its own, and a default pin's unpinned ones.
        static func held(_ pin: String) -> String {
            """
            SELECT c.id AS copy_id FROM copies c WHERE c.pin_id = \(pin).id AND c.status = 'available' AND \(Visibility.shown("c", owner: "owner_id"))
                    UNION ALL
                    SELECT c.id FROM copies c
                    WHERE \(pin).is_default AND c.owner_id = \(pin).owner_id AND c.pin_id IS NULL AND c.status = 'available'
                      AND \(Visibility.shown("c", owner: "owner_id"))
            """
        }
        static let sql = """
            SELECT c.id, page.meters / 1000, \(CopiesStore.columns) FROM (
                SELECT placed.copy_id, near.meters FROM (\(nearestPins)) near
                CROSS JOIN LATERAL (\(held("near"))) placed
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

    /// Nearby owners as a skilled PostGIS user would write them: pins nearest first by the
    /// geography index, kept where the pin holds a shown available copy and no nearer pin of the
    /// same owner does (so each owner comes once, at their nearest holding pin), incrementally
    /// sorted by (distance, owner) and cut at the `LIMIT`; then, for the page's owners only, their
    /// matching copies on every pin of theirs in the radius, found by the owner index (written
    /// `ST_DWithin`, the planner read the whole radius by the GiST index for each owner: 2 ms
    /// each). Parameters as `PostGIS`.
    struct PostGISOwners {
        static let origin = PostGIS.origin
        static func holds(_ pin: String) -> String { "EXISTS (\(PostGIS.held(pin)))" }
        static let sql = """
            SELECT u.id, page.meters / 1000,
                   (SELECT count(*) FROM bench_pin_geog op CROSS JOIN LATERAL (\(PostGIS.held("op"))) held
                    WHERE op.owner_id = page.owner_id AND ST_Distance(op.geog, \(origin), false) <= $3 * 1000)
            FROM (
                SELECT near.owner_id, near.meters FROM (\(PostGIS.nearestPins(blocks: BlocksStore.noBlockBetween("$5", "g.owner_id")))) near
                WHERE \(holds("near"))
                  AND NOT EXISTS (
                      SELECT 1 FROM bench_pin_geog o
                      WHERE o.owner_id = near.owner_id AND o.id <> near.id
                        AND ((o.geog <-> \(origin)) < near.meters OR ((o.geog <-> \(origin)) = near.meters AND o.id < near.id))
                        AND \(holds("o")))
                ORDER BY near.meters, near.owner_id
                LIMIT $4
            ) page
            JOIN users u ON u.id = page.owner_id
            ORDER BY page.meters, u.id
            """
    }

    /// The reference with its values written in, as a pgbench script prepares it: a prepared
    /// statement without parameters is planned with the point itself. Given parameters, the
    /// server switches to a generic plan after five runs, and for this statement that plan
    /// sorts every pin in the radius (40 ms instead of 0.6); a skilled user would not let it.
    static func literalPostGIS(latitude: Double, longitude: Double, radiusKm: Double, limit: Int, caller: UUID) -> String {
        literal(PostGIS.sql, latitude: latitude, longitude: longitude, radiusKm: radiusKm, limit: limit, caller: caller)
    }

    /// `PostGISOwners` with its values written in, for the same reason.
    static func literalPostGISOwners(latitude: Double, longitude: Double, radiusKm: Double, limit: Int, caller: UUID) -> String {
        literal(PostGISOwners.sql, latitude: latitude, longitude: longitude, radiusKm: radiusKm, limit: limit, caller: caller)
    }

    private static func literal(_ text: String, latitude: Double, longitude: Double, radiusKm: Double, limit: Int, caller: UUID) -> String {
        var sql = text
        for (parameter, value) in [("$5", "'\(caller.uuidString)'::uuid"), ("$4", "\(limit)"), ("$3", "\(radiusKm)::float8"),
                                   ("$2", "\(longitude)::float8"), ("$1", "\(latitude)::float8")] {
            sql = sql.replacingOccurrences(of: parameter, with: value)
        }
        return sql
    }

    /// Timed runs per point and side, of which the median is kept. One run each let the
    /// machine's stalls decide the p99: a few points a run took 6 ms on one side and 0.5–0.7 on
    /// the other (a different handful each run, on either side), and the p99 ratio moved between
    /// 0.83 and 1.30 across runs of one build.
    static let runsPerPoint = 3

    /// The median of `runs` runs of `body`, in milliseconds.
    static func median(runs: Int = runsPerPoint, _ body: () async throws -> Void) async throws -> Double {
        var times: [Double] = []
        for _ in 0..<runs { times.append(try await ContinuousClock().measure { try await body() }.milliseconds) }
        return times.sorted()[times.count / 2]
    }

    /// Prepares `sql` (no parameters), runs it once to plan and warm it, then times it
    /// (`median`): execution only, as pgbench `-M prepared` measures a script run many times.
    static func timePrepared(_ sql: String, on connection: PostgresConnection) async throws -> (Double, [PostgresRow]) {
        try await connection.query(PostgresQuery(unsafeSQL: "PREPARE bench_reference AS " + sql), logger: connection.logger)
        for try await _ in try await connection.query(PostgresQuery(unsafeSQL: "EXECUTE bench_reference"), logger: connection.logger) {}
        var rows: [PostgresRow] = []
        let elapsed = try await median {
            rows = []
            let sequence = try await connection.query(PostgresQuery(unsafeSQL: "EXECUTE bench_reference"), logger: connection.logger)
            for try await row in sequence { rows.append(row) }
        }
        try await connection.query(PostgresQuery(unsafeSQL: "DEALLOCATE bench_reference"), logger: connection.logger)
        return (elapsed, rows)
    }

    /// The floor: the 50 nearest pins and nothing else, by the project's cube index.
    /// $1–$3 the origin on the unit sphere, $4 limit.
    struct CubeFloor: PreparedSQL {
        static let name = "bookworm_bench_cube_floor"
        static let sql = "SELECT id FROM pins ORDER BY public_xyz <-> cube(ARRAY[$1, $2, $3]::float8[]) LIMIT $4"
        let values: [SQLValue]

        init(latitude: Double, longitude: Double, limit: Int) {
            let lat = latitude * .pi / 180, lon = longitude * .pi / 180
            values = [.double(cos(lat) * cos(lon)), .double(cos(lat) * sin(lon)), .double(sin(lat)), .int(limit)]
        }
    }

    /// The floor by PostGIS: the 50 nearest pins by the geography index.
    struct PostGISFloor: PreparedSQL {
        static let name = "bookworm_bench_postgis_floor"
        static let sql = "SELECT id FROM bench_pin_geog ORDER BY geog <-> ST_SetSRID(ST_MakePoint($2, $1), 4326)::geography LIMIT $3"
        let values: [SQLValue]

        init(latitude: Double, longitude: Double, limit: Int) {
            values = [.double(latitude), .double(longitude), .int(limit)]
        }
    }

    /// The project's statement timed as the references are (prepared, raw rows on one
    /// connection, nothing decoded past the keys), in the server's rounds (`NearbyStore.inRounds`)
    /// until the page is provably complete. Returns (milliseconds, copy ids, rounds).
    /// `runs: 1` warms it as the references are warmed, by one run.
    static func timeProject(_ query: NearbyQuery, limit: Int, runs: Int = runsPerPoint, on connection: PostgresConnection) async throws
        -> (Double, [UUID], Int)
    {
        try await timeRounds(query, limit: limit, firstRound: NearbyStore.firstPinLimit(limit: limit), statement: NearbyCopiesSQL.init,
                             key: { try $0[5].decode(UUID.self) }, runs: runs, on: connection)
    }

    /// The same for nearby owners: (milliseconds, owner ids with their matching copies, rounds).
    static func timeProjectOwners(_ query: NearbyQuery, limit: Int, runs: Int = runsPerPoint, on connection: PostgresConnection) async throws
        -> (Double, [OwnerKey], Int)
    {
        try await timeRounds(query, limit: limit, firstRound: NearbyStore.firstOwnersPinLimit(limit: limit), statement: NearbyOwnersSQL.init,
                             key: { OwnerKey(id: try $0[3].decode(UUID.self), matching: try $0[6].decode(Int64.self)) }, runs: runs,
                             on: connection)
    }

    struct OwnerKey: Equatable {
        let id: UUID
        let matching: Int64
    }

    private static func timeRounds<Statement: PreparedSQL, Key>(
        _ query: NearbyQuery, limit: Int, firstRound: Int, statement: ([SQLValue]) -> Statement, key: (PostgresRandomAccessRow) throws -> Key,
        runs: Int, on connection: PostgresConnection) async throws -> (Double, [Key], Int)
    {
        var keys: [Key] = []
        var rounds = 0
        // As the server runs it (`Database.executeOnGenericPlan`), set outside the timing.
        try await connection.query("SELECT set_config('plan_cache_mode', 'force_generic_plan', false)", logger: connection.logger)
        let elapsed = try await median(runs: runs) {
            var pinLimit = firstRound
            rounds = 0
            while true {
                let values = NearbyStore.copiesStatement(query, after: nil, limit: limit, pinLimit: pinLimit).values
                var more = false
                keys = []
                rounds += 1
                for try await row in try await connection.execute(statement(values), logger: connection.logger) {
                    let cells = PostgresRandomAccessRow(row)
                    more = try cells[0].decode(Bool.self) || more
                    guard try cells[1].decode(Double?.self) != nil else { continue }
                    keys.append(try key(cells))
                }
                if NearbyStore.isComplete(more: more, rows: keys.count, limit: limit) { break }
                pinLimit *= 8
            }
        }
        try await connection.query("RESET plan_cache_mode", logger: connection.logger)
        return (elapsed, keys, rounds)
    }

    /// A prepared statement on `connection`, timed (`median`): (milliseconds, rows).
    static func time<Statement: PreparedSQL>(_ statement: Statement, on connection: PostgresConnection) async throws
        -> (Double, [PostgresRow])
    {
        var rows: [PostgresRow] = []
        let elapsed = try await median {
            rows = []
            for try await row in try await connection.execute(statement, logger: connection.logger) { rows.append(row) }
        }
        return (elapsed, rows)
    }
}
