import Foundation
import Logging
import PostgresNIO

/// Nearest-first searches. Distances are measured to each pin's public point only, so nothing
/// another user sees depends on where inside its cell a home really is. The box prefilter
/// uses the GiST index on public points; the exact haversine decides inclusion and order.
struct NearbyStore: Sendable {
    let client: PostgresClient
    let logger: Logger

    static let boxFilter = """
        (point(p.public_longitude, p.public_latitude) <@ box(point($4, $5), point($6, $7))
                   OR point(p.public_longitude, p.public_latitude) <@ box(point($8, $9), point($10, $11)))
        """

    /// `near`: pins within the radius that are not the caller's. `placed`: the available copies
    /// each stands for (those placed on it and, for a default pin, its owner's unplaced ones) that
    /// match the search. Only copy ids and distances flow through here; details are joined for
    /// the one page that survives the sort. Parameters $1–$14.
    static let placedSQL = """
        WITH near AS MATERIALIZED (
            SELECT p.id, p.owner_id, p.is_default, p.public_latitude, p.public_longitude,
                   bookworm_distance_km($1, $2, p.public_latitude, p.public_longitude) AS distance
            FROM pins p
            WHERE \(boxFilter)
              AND bookworm_distance_km($1, $2, p.public_latitude, p.public_longitude) <= $3
              AND p.owner_id <> $12
              AND \(BlocksStore.noBlockBetween("$12", "p.owner_id"))
        ), wanted_book AS (
            SELECT id FROM books WHERE isbn13 = $14
        ), placed AS (
            SELECT c.id AS copy_id, c.owner_id, near.distance, near.public_latitude, near.public_longitude
            FROM near JOIN copies c ON c.pin_id = near.id
            WHERE c.status = 'available'
              AND ($13::text[] IS NULL OR c.search @@ bookworm_search_query($13))
              AND ($14::text IS NULL OR c.book_id IN (SELECT id FROM wanted_book))
            UNION ALL
            SELECT c.id, c.owner_id, near.distance, near.public_latitude, near.public_longitude
            FROM near JOIN copies c ON c.owner_id = near.owner_id AND c.pin_id IS NULL
            WHERE near.is_default AND c.status = 'available'
              AND ($13::text[] IS NULL OR c.search @@ bookworm_search_query($13))
              AND ($14::text IS NULL OR c.book_id IN (SELECT id FROM wanted_book))
        )
        """

    static func placedValues(_ query: NearbyQuery) -> [SQLValue] {
        let boxes = Geo.boundingBoxes(around: query.origin, radiusKm: query.radiusKm)
        let first = boxes[0]
        let second = boxes.count > 1 ? boxes[1] : boxes[0]
        return [.double(query.origin.latitude), .double(query.origin.longitude), .double(query.radiusKm),
                .double(first.west), .double(first.south), .double(first.east), .double(first.north),
                .double(second.west), .double(second.south), .double(second.east), .double(second.north),
                .uuid(query.callerID), .textArray(query.words), .text(query.isbn13)]
    }

    /// Nearest first with early exit: pins in the radius sorted by distance, each pin's copies
    /// fetched as the scan goes, so a page of 50 in a dense city touches a few dozen pins rather
    /// than every copy within the radius. Details are joined for the page only.
    static func copiesStatement(_ query: NearbyQuery, after: DistanceCursor?, limit: Int) -> SQLStatement {
        SQLStatement(sql: """
            WITH page AS (
                SELECT placed.copy_id, near.distance, near.public_latitude, near.public_longitude
                FROM (
                    SELECT p.id, p.owner_id, p.is_default, p.public_latitude, p.public_longitude,
                           bookworm_distance_km($1, $2, p.public_latitude, p.public_longitude) AS distance
                    FROM pins p
                    WHERE \(boxFilter)
                      AND bookworm_distance_km($1, $2, p.public_latitude, p.public_longitude) <= $3
                      AND p.owner_id <> $12
              AND \(BlocksStore.noBlockBetween("$12", "p.owner_id"))
                      AND ($15::float8 IS NULL OR bookworm_distance_km($1, $2, p.public_latitude, p.public_longitude) >= $15)
                    ORDER BY distance
                ) near
                CROSS JOIN LATERAL (
                    SELECT c.id AS copy_id FROM copies c
                    WHERE c.pin_id = near.id AND c.status = 'available'
                      AND ($13::text[] IS NULL OR c.search @@ bookworm_search_query($13))
                      AND ($14::text IS NULL OR c.book_id IN (SELECT id FROM books WHERE isbn13 = $14))
                    UNION ALL
                    SELECT c.id FROM copies c
                    WHERE near.is_default AND c.owner_id = near.owner_id AND c.pin_id IS NULL AND c.status = 'available'
                      AND ($13::text[] IS NULL OR c.search @@ bookworm_search_query($13))
                      AND ($14::text IS NULL OR c.book_id IN (SELECT id FROM books WHERE isbn13 = $14))
                ) placed
                WHERE $15::float8 IS NULL OR (near.distance, placed.copy_id) > ($15, $16)
                ORDER BY near.distance, placed.copy_id
                LIMIT $17
            )
            SELECT \(CopiesStore.columns), page.distance, page.public_latitude, page.public_longitude
            FROM page JOIN copies c ON c.id = page.copy_id
                 JOIN books b ON b.id = c.book_id JOIN users u ON u.id = c.owner_id
            ORDER BY page.distance, c.id
            """, values: placedValues(query) + [.double(after?.distance), .uuid(after?.id), .int(limit)])
    }

    static func ownersStatement(_ query: NearbyQuery, after: DistanceCursor?, limit: Int) -> SQLStatement {
        SQLStatement(sql: placedSQL + """
            , owners AS (
                SELECT owner_id, min(distance) AS distance, count(*) AS matching FROM placed GROUP BY owner_id
            ), page AS (
                SELECT * FROM owners
                WHERE $15::float8 IS NULL OR (distance, owner_id) > ($15, $16)
                ORDER BY distance, owner_id
                LIMIT $17
            )
            SELECT u.id, u.username, u.display_name, page.distance, page.matching::int8
            FROM page JOIN users u ON u.id = page.owner_id
            ORDER BY page.distance, u.id
            """, values: placedValues(query) + [.double(after?.distance), .uuid(after?.id), .int(limit)])
    }

    func copies(_ query: NearbyQuery, after: DistanceCursor?, limit: Int) async throws -> [NearbyCopy] {
        let rows = try await client.query(Self.copiesStatement(query, after: after, limit: limit).query, logger: logger)
        var result: [NearbyCopy] = []
        for try await row in rows.decode((UUID, String, String, String?, UUID?, String?, Date, Date, Int64,
                                          UUID, String?, String, [String], UUID, String, String?, Double, Double, Double).self) {
            let copy = CopiesStore.view((row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8,
                                         row.9, row.10, row.11, row.12, row.13, row.14, row.15))
            result.append(NearbyCopy(copy: copy, distanceKm: row.16, place: PublicPlace(latitude: row.17, longitude: row.18)))
        }
        return result
    }

    func owners(_ query: NearbyQuery, after: DistanceCursor?, limit: Int) async throws -> [NearbyOwner] {
        let rows = try await client.query(Self.ownersStatement(query, after: after, limit: limit).query, logger: logger)
        var result: [NearbyOwner] = []
        for try await (id, username, displayName, distance, matching) in rows.decode((UUID, String, String?, Double, Int).self) {
            result.append(NearbyOwner(user: OwnerSummary(id: id, username: username, displayName: displayName),
                                      distanceKm: distance, matchingCopies: matching))
        }
        return result
    }
}

/// What the nearby benchmark needs to run the server's own SQL beside PostGIS and a full scan.
public enum NearbyBenchmarkSQL {
    /// The statement behind `GET /v1/nearby/copies` (first page of `limit`), parameters as literals.
    public static func nearbyCopies(latitude: Double, longitude: Double, radiusKm: Double, limit: Int, caller: UUID) -> String {
        let query = NearbyQuery(origin: GeoPoint(latitude: latitude, longitude: longitude), radiusKm: radiusKm,
                                words: nil, isbn13: nil, callerID: caller)
        return NearbyStore.copiesStatement(query, after: nil, limit: limit).literalSQL
    }

    /// The same statement with the box prefilter taken out: every pin's distance is computed.
    public static func fullScan(latitude: Double, longitude: Double, radiusKm: Double, limit: Int, caller: UUID) -> String {
        nearbyCopies(latitude: latitude, longitude: longitude, radiusKm: radiusKm, limit: limit, caller: caller)
            .replacingOccurrences(of: literalBoxFilter(latitude: latitude, longitude: longitude, radiusKm: radiusKm), with: "true")
    }

    private static func literalBoxFilter(latitude: Double, longitude: Double, radiusKm: Double) -> String {
        let query = NearbyQuery(origin: GeoPoint(latitude: latitude, longitude: longitude), radiusKm: radiusKm,
                                words: nil, isbn13: nil, callerID: UUID())
        return SQLStatement(sql: NearbyStore.boxFilter, values: NearbyStore.placedValues(query)).literalSQL
    }

    /// Rows of the project's query are copy ids in order; PostGIS's answer must match them.
    public static func postGIS(latitude: Double, longitude: Double, radiusKm: Double, limit: Int, caller: UUID) -> String {
        """
        WITH origin AS (SELECT ST_SetSRID(ST_MakePoint(\(longitude), \(latitude)), 4326)::geography AS geog),
        page AS (
            SELECT placed.copy_id, near.distance
            FROM (
                SELECT g.id, g.owner_id, g.is_default, (g.geog <-> origin.geog) / 1000 AS distance
                FROM bench_pin_geog g, origin
                WHERE ST_DWithin(g.geog, origin.geog, \(radiusKm * 1000), false) AND g.owner_id <> '\(caller.apiString)'
                ORDER BY g.geog <-> origin.geog
            ) near
            CROSS JOIN LATERAL (
                SELECT c.id AS copy_id FROM copies c WHERE c.pin_id = near.id AND c.status = 'available'
                UNION ALL
                SELECT c.id FROM copies c
                WHERE near.is_default AND c.owner_id = near.owner_id AND c.pin_id IS NULL AND c.status = 'available'
            ) placed
            ORDER BY near.distance, placed.copy_id
            LIMIT \(limit)
        )
        SELECT c.id, page.distance FROM page
            JOIN copies c ON c.id = page.copy_id JOIN books b ON b.id = c.book_id JOIN users u ON u.id = c.owner_id
        ORDER BY page.distance, c.id
        """
    }

    /// A geography copy of the pins' public points for PostGIS, with its GiST index.
    public static let postGISSetup = """
        CREATE EXTENSION IF NOT EXISTS postgis;
        DROP TABLE IF EXISTS bench_pin_geog;
        CREATE TABLE bench_pin_geog AS
            SELECT id, owner_id, is_default, ST_SetSRID(ST_MakePoint(public_longitude, public_latitude), 4326)::geography AS geog FROM pins;
        CREATE INDEX bench_pin_geog_idx ON bench_pin_geog USING gist (geog);
        ANALYZE bench_pin_geog;
        """
}
