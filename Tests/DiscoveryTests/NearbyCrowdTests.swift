import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Places
@testable import Discovery
@testable import BookwormTestSupport

/// A crowded cell: hundreds of homes share its centre, so their copies tie on distance. A page
/// that fills before the crowd must not read the crowd's copies; a page that reaches it must
/// hold them in id order, filtered or not.
@Suite struct NearbyCrowdTests {
    private static let logger = Logger(label: "nearby-crowd-test")
    let origin = GeoPoint(latitude: 48.8566, longitude: 2.3522)

    /// Eight meetup pins 0.2 to 1.6 km north with four copies each, then 200 homes whose
    /// public point is one cell centre about 3 km north, three copies each. Titles alternate,
    /// so `q=moby` keeps half. Returns every copy with its public distance and title.
    private func seedCrowd(_ app: TestApp, owner: UUID) async throws -> [(id: String, distance: Double, title: String)] {
        let crowd = Geo.cellCentre(of: GeoPoint(latitude: origin.latitude + 0.027, longitude: origin.longitude))
        try await app.db.query("""
            INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude)
            SELECT \(owner), 'near ' || i, 'meetup', \(origin.latitude) + i * 0.0018, \(origin.longitude),
                   \(origin.latitude) + i * 0.0018, \(origin.longitude)
            FROM generate_series(1, 8) AS i
            """)
        try await seedHomes(app, owner: owner, sharing: crowd, count: 200)
        try await app.db.query("""
            INSERT INTO books (id, title, authors) VALUES ('00000000-0000-0000-0000-0000000000a1', 'Moby Dick', ARRAY['Melville']),
                                                          ('00000000-0000-0000-0000-0000000000a2', 'Ulysses', ARRAY['Joyce'])
            """)
        try await app.db.query("""
            INSERT INTO copies (owner_id, book_id, condition, pin_id)
            SELECT \(owner), CASE WHEN n % 2 = 0 THEN '00000000-0000-0000-0000-0000000000a1'::uuid
                                  ELSE '00000000-0000-0000-0000-0000000000a2'::uuid END, 'good', p.id
            FROM pins p CROSS JOIN generate_series(1, CASE WHEN p.kind = 'meetup' THEN 4 ELSE 3 END) AS n
            """)
        try await app.db.query("VACUUM ANALYZE copies")
        var copies: [(id: String, distance: Double, title: String)] = []
        for try await (id, latitude, longitude, title) in try await app.db.query("""
            SELECT c.id, p.public_latitude, p.public_longitude, b.title FROM copies c JOIN pins p ON p.id = c.pin_id JOIN books b ON b.id = c.book_id
            """).decode((UUID, Double, Double, String).self) {
            copies.append((id.apiString, Geo.distanceKm(origin, GeoPoint(latitude: latitude, longitude: longitude)), title))
        }
        return copies.sorted { ($0.distance, $0.id) < ($1.distance, $1.id) }
    }

    /// `count` homes of `owner` a few metres apart whose public point is the one cell centre `centre`.
    private func seedHomes(_ app: TestApp, owner: UUID, sharing centre: GeoPoint, count: Int) async throws {
        try await app.db.query("""
            INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude)
            SELECT \(owner), 'crowd ' || i, 'home', \(centre.latitude) + (i % 10) * 0.0002, \(centre.longitude) + (i / 10) * 0.0002,
                   \(centre.latitude), \(centre.longitude)
            FROM generate_series(0, \(count - 1)) AS i
            """)
    }

    @Test func pagesReachingACrowdedCellHoldItsCopiesInIdOrderFilteredOrNot() async throws {
        try await withApp { app in
            let observer = try await app.register()
            let owner = try #require(UUID(uuidString: try await app.register().id))
            let copies = try await seedCrowd(app, owner: owner)
            #expect(copies.count == 632)
            for (filter, expected) in [("", copies), ("&q=moby", copies.filter { $0.title == "Moby Dick" })] {
                let path = "/v1/nearby/copies?latitude=\(origin.latitude)&longitude=\(origin.longitude)&radius_km=10\(filter)"
                let got = try await app.allNearby(path, token: observer.token, limit: 20).compactMap { $0["id"] as? String }
                #expect(got == expected.map(\.id), "filter \(filter)")
            }
        }
    }

    /// The server's generic plan, first round: the eight meetups' 32 copies fill a page of 21,
    /// so the nearest-neighbour scan stops before the crowd (at most the meetups and one pin
    /// more) and none of its 600 copies is read; past the candidates, only the page's 21 copies
    /// are read by id.
    @Test func aPageThatFillsBeforeACrowdedCellReadsNoneOfItsCopies() async throws {
        try await withApp { app in
            let viewer = try #require(UUID(uuidString: try await app.register().id))
            let owner = try #require(UUID(uuidString: try await app.register().id))
            _ = try await seedCrowd(app, owner: owner)
            try await seedElsewhere(app, pins: 8_000)
            let query = NearbyQuery(origin: origin, radiusKm: 10, callerID: viewer)
            let statement = NearbyStore.copiesStatement(query, after: nil, limit: 21, pinLimit: NearbyStore.firstPinLimit(limit: 21))
            let read = try await app.db.withConnection { connection in
                let json = try await PlanRows.genericPlan(statement.sql, types: Self.roundTypes, arguments: statement.values.map(Self.literal),
                                                          on: connection, logger: Self.logger)
                return (copies: PlanRows.read("copies", in: json), pins: PlanRows.read("pins", in: json))
            }
            #expect(read.copies >= 21 && read.copies <= 32 + 21, "\(read.copies) copy entries read")
            #expect(read.pins <= 9, "\(read.pins) pins read")
        }
    }

    private static let roundTypes = CopiesRoundTypes.all.map { $0.knownSQLName ?? "unknown" }.joined(separator: ", ")

    /// 300 meetup pins in a line north, and copies only on the ten farthest: the first rounds'
    /// nearest pins (32, then 256 for copies; 64 for owners), all inside the radius, hold none,
    /// so the page is empty but may be missing rows, and a later round finds them. Copies and
    /// owners alike come back whole and nearest first.
    @Test func aRoundWhosePinsHoldNothingTakesTheNextRound() async throws {
        try await withApp { app in
            let observer = try await app.register()
            let owners = [try #require(UUID(uuidString: try await app.register().id)), try #require(UUID(uuidString: try await app.register().id))]
            try await app.db.query("""
                INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude)
                SELECT CASE WHEN i % 2 = 0 THEN \(owners[0]) ELSE \(owners[1]) END, 'line ' || i, 'meetup',
                       \(origin.latitude) + i * 0.0002, \(origin.longitude), \(origin.latitude) + i * 0.0002, \(origin.longitude)
                FROM generate_series(1, 300) AS i
                """)
            try await app.db.query("INSERT INTO books (id, title, authors) VALUES ('00000000-0000-0000-0000-0000000000b1', 'Far', ARRAY['Away'])")
            try await app.db.query("""
                INSERT INTO copies (owner_id, book_id, condition, pin_id)
                SELECT owner_id, '00000000-0000-0000-0000-0000000000b1', 'good', id FROM pins ORDER BY public_latitude DESC LIMIT 10
                """)
            var expected: [String] = []
            for try await id in try await app.db.query("""
                SELECT c.id FROM copies c JOIN pins p ON p.id = c.pin_id ORDER BY p.public_latitude, c.id
                """).decode(UUID.self) { expected.append(id.apiString) }
            let near = "latitude=\(origin.latitude)&longitude=\(origin.longitude)&radius_km=10"
            let copies = try await app.allNearby("/v1/nearby/copies?" + near, token: observer.token, limit: 5)
            #expect(copies.compactMap { $0["id"] as? String } == expected)
            let found = try await app.allNearby("/v1/nearby/owners?" + near, token: observer.token, limit: 5)
            #expect(Set(found.compactMap { ($0["user"] as? [String: Any])?["id"] as? String }) == Set(owners.map(\.apiString)))
            #expect(found.compactMap { $0["matching_copies"] as? Int } == [5, 5])
        }
    }

    /// 100 homes sharing one cell centre about 1 km north, copies on three of them only, then
    /// meetups farther north with a copy each. Pages of two: the second page's cursor sits
    /// inside the crowd, whose pins all tie with its chord and fill the round's cap, so the
    /// round's sentinel (the cap-th pin, at the cursor's very chord) must pass the cursor for
    /// the page to take the next round and reach the meetups.
    @Test func aCursorInsideACrowdOfEmptyHomesStillTakesTheNextRound() async throws {
        try await withApp { app in
            let observer = try await app.register()
            let owner = try #require(UUID(uuidString: try await app.register().id))
            let crowd = Geo.cellCentre(of: GeoPoint(latitude: origin.latitude + 0.009, longitude: origin.longitude))
            try await seedHomes(app, owner: owner, sharing: crowd, count: 100)
            try await app.db.query("""
                INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude)
                SELECT \(owner), 'meetup ' || i, 'meetup', \(origin.latitude) + 0.02 + i * 0.001, \(origin.longitude),
                       \(origin.latitude) + 0.02 + i * 0.001, \(origin.longitude)
                FROM generate_series(1, 5) AS i
                """)
            try await app.db.query("INSERT INTO books (id, title, authors) VALUES ('00000000-0000-0000-0000-0000000000c1', 'Crowd', ARRAY['Many'])")
            try await app.db.query("""
                INSERT INTO copies (owner_id, book_id, condition, pin_id)
                SELECT \(owner), '00000000-0000-0000-0000-0000000000c1', 'good', id
                FROM ((SELECT id FROM pins WHERE kind = 'home' ORDER BY id LIMIT 3)
                      UNION ALL (SELECT id FROM pins WHERE kind = 'meetup')) holding
                """)
            var expected: [String] = []
            for try await id in try await app.db.query("""
                SELECT c.id FROM copies c JOIN pins p ON p.id = c.pin_id ORDER BY p.public_latitude, c.id
                """).decode(UUID.self) { expected.append(id.apiString) }
            let near = "latitude=\(origin.latitude)&longitude=\(origin.longitude)&radius_km=10"
            let copies = try await app.allNearby("/v1/nearby/copies?" + near, token: observer.token, limit: 2)
            #expect(expected.count == 8)
            #expect(copies.compactMap { $0["id"] as? String } == expected)
        }
    }

    /// Pins with two copies each, of a thousand owners, spread over the rest of the world, so
    /// that the planner sees tables of a city's size: on a few hundred pins of one owner it
    /// rightly expects the radius to hold less than a page, and sorts it all. Bulk rows, so the
    /// change log's triggers are off for the seeding connection.
    private func seedElsewhere(_ app: TestApp, pins: Int) async throws {
        try await app.db.withConnection { connection in
            try await connection.query("SET session_replication_role = replica", logger: Self.logger)
            try await connection.query("""
                INSERT INTO users (email, email_normalized, username, password_hash)
                SELECT 'far' || i || '@example.org', 'far' || i || '@example.org', 'far_' || i, 'x' FROM generate_series(1, 1000) AS i
                """, logger: Self.logger)
            try await connection.query("""
                INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude)
                SELECT u.id, 'far', 'meetup', lat, lon, lat, lon
                FROM (SELECT i, -60 + (i % 997) * 0.04 AS lat, -170 + (i / 997) * 1.7 AS lon FROM generate_series(1, \(pins)) AS i) far
                JOIN users u ON u.username = 'far_' || (far.i % 1000 + 1)
                WHERE abs(lat - \(origin.latitude)) > 1
                """, logger: Self.logger)
            try await connection.query("""
                INSERT INTO copies (owner_id, book_id, condition, pin_id)
                SELECT p.owner_id, '00000000-0000-0000-0000-0000000000a1', 'good', p.id
                FROM pins p CROSS JOIN generate_series(1, 2) WHERE p.label = 'far'
                """, logger: Self.logger)
            try await connection.query("RESET session_replication_role", logger: Self.logger)
        }
        try await app.db.query("VACUUM ANALYZE users")
        try await app.db.query("VACUUM ANALYZE pins")
        try await app.db.query("VACUUM ANALYZE copies")
    }

    private static func literal(_ value: SQLValue) -> String {
        switch value {
        case .double(let number): number.map { "\($0)::float8" } ?? "NULL"
        case .int(let number): number.map { "\($0)" } ?? "NULL"
        case .uuid(let id): id.map { "'\($0.uuidString)'::uuid" } ?? "NULL"
        case .text(let text): text.map { "'\($0)'" } ?? "NULL"
        case .textArray(nil): "NULL"
        case .textArray(let words?): "ARRAY[" + words.map { "'\($0)'" }.joined(separator: ", ") + "]::text[]"
        default: "NULL"
        }
    }
}
