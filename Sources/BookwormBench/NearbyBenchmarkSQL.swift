import BookwormCore
import Discovery
import Foundation
import Logging
import Places
import PostgresNIO

/// What the nearby benchmark needs to run the server's own SQL beside PostGIS and a full scan.
enum NearbyBenchmarkSQL {
    /// The first round of the statement behind `GET /v1/nearby/copies` (the 32 nearest pins,
    /// a page of `limit`), parameters as literals, for pgbench.
    static func nearbyCopies(latitude: Double, longitude: Double, radiusKm: Double, limit: Int, caller: UUID) -> String {
        NearbyStore.copiesStatement(query(latitude, longitude, radiusKm, caller), after: nil, limit: limit,
                                    pinLimit: NearbyStore.firstPinLimit(limit: limit)).literalSQL
    }

    /// The first page exactly as the server gets it (`NearbyStore.copies`: prepared statement,
    /// rounds of nearest pins): copy ids and `distance_km`, nearest first.
    static func projectPage(database: Database, latitude: Double, longitude: Double, radiusKm: Double, limit: Int,
                            caller: UUID) async throws -> [(UUID, Double)] {
        let store = NearbyStore(client: database, logger: Logger(label: "bench"))
        return try await store.copies(query(latitude, longitude, radiusKm, caller), after: nil, limit: limit)
            .map { ($0.copy.id, $0.distanceKm) }
    }

    private static func query(_ latitude: Double, _ longitude: Double, _ radiusKm: Double, _ caller: UUID) -> NearbyQuery {
        NearbyQuery(origin: GeoPoint(latitude: latitude, longitude: longitude), radiusKm: radiusKm,
                    words: nil, isbn13: nil, callerID: caller)
    }

    /// The reference for "how much does the index save", taken literally: no index, the exact
    /// haversine of every available copy's public point (its pin's, or its owner's default
    /// pin's), filtered by radius and sorted, one page of details joined.
    static func fullScan(latitude: Double, longitude: Double, radiusKm: Double, limit: Int, caller: UUID) -> String {
        let distance = "bookworm_distance_km(\(latitude)::float8, \(longitude)::float8, placed.lat, placed.lon)"
        return """
            WITH placed AS (
                SELECT c.id AS copy_id, coalesce(p.public_latitude, d.public_latitude) AS lat,
                       coalesce(p.public_longitude, d.public_longitude) AS lon
                FROM copies c
                LEFT JOIN pins p ON p.id = c.pin_id
                LEFT JOIN pins d ON c.pin_id IS NULL AND d.owner_id = c.owner_id AND d.is_default
                WHERE c.status = 'available' AND c.owner_id <> '\(caller.apiString)'
            ), page AS (
                SELECT placed.copy_id, \(distance) AS distance FROM placed
                WHERE \(distance) <= \(radiusKm)::float8
                ORDER BY distance, placed.copy_id
                LIMIT \(limit)
            )
            """ + pageDetails
    }

    /// Every reference ends like the server's query: the page's copies joined to their books and owners.
    private static let pageDetails = """

        SELECT c.id, page.distance FROM page
            JOIN copies c ON c.id = page.copy_id JOIN books b ON b.id = c.book_id JOIN users u ON u.id = c.owner_id
        ORDER BY page.distance, c.id
        """

    /// Every table and index either side reads, read once into the page cache first: on a fresh
    /// machine the first thousand points would otherwise time the disk, for both sides alike.
    package static let prewarm = """
        CREATE EXTENSION IF NOT EXISTS pg_prewarm;
        SELECT count(pg_prewarm(c.oid::regclass, 'buffer'))
        FROM pg_class c
        WHERE c.relname IN ('copies', 'pins', 'books', 'users', 'bench_pin_geog')
           OR c.oid IN (SELECT indexrelid FROM pg_index
                        WHERE indrelid IN ('copies'::regclass, 'pins'::regclass, 'books'::regclass, 'users'::regclass,
                                           'bench_pin_geog'::regclass));
        """

    /// The viewer the comparison with PostGIS runs as: a user of its own who has blocked a
    /// thousand owners of pins and been blocked by a thousand more (one in fifty owners), so
    /// that both sides must apply the block rule to return the same ids. A block changes only
    /// what its two users see, so no other benchmark's figures move. Idempotent, and never a block
    /// of itself: a later benchmark's seed gives pins to users who have none, this one among them
    /// (the second `make bench` on a cluster failed on the blocks' check constraint).
    static func viewerSetup(_ viewer: UUID) -> String {
        let id = "'\(viewer.uuidString)'::uuid"
        return """
            INSERT INTO users (id, email, email_normalized, username, password_hash)
            VALUES (\(id), 'nearby-viewer@bench.invalid', 'nearby-viewer@bench.invalid', 'nearby_bench_viewer', 'x')
            ON CONFLICT DO NOTHING;
            DELETE FROM blocks WHERE blocker_id = \(id) OR blocked_id = \(id);
            INSERT INTO blocks (blocker_id, blocked_id)
                SELECT \(id), owner_id FROM (SELECT DISTINCT owner_id FROM pins WHERE owner_id <> \(id) ORDER BY owner_id LIMIT 1000) o;
            INSERT INTO blocks (blocker_id, blocked_id)
                SELECT owner_id, \(id) FROM (SELECT DISTINCT owner_id FROM pins WHERE owner_id <> \(id) ORDER BY owner_id OFFSET 1000 LIMIT 1000) o;
            ANALYZE blocks;
            """
    }

    /// A geography copy of the pins' public points for PostGIS, with its GiST index.
    package static let postGISSetup = """
        CREATE EXTENSION IF NOT EXISTS postgis;
        DROP TABLE IF EXISTS bench_pin_geog;
        CREATE TABLE bench_pin_geog AS
            SELECT id, owner_id, is_default, ST_SetSRID(ST_MakePoint(public_longitude, public_latitude), 4326)::geography AS geog FROM pins;
        CREATE INDEX bench_pin_geog_idx ON bench_pin_geog USING gist (geog);
        CREATE INDEX bench_pin_geog_owner_idx ON bench_pin_geog (owner_id);
        ANALYZE bench_pin_geog;
        """
}
