import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Places
@testable import Discovery
@testable import BookwormTestSupport

/// Nearby owners are read in rounds of nearest pins. Every page, followed by cursor with a small
/// limit, must give exactly what measuring every pin in the radius gives (a brute force in SQL):
/// the same owners in the same order, at the same distance, with the same count.
@Suite struct NearbyOwnersTests {
    @Test func nearbyOwnersPageByPageEqualEveryPinInTheRadius() async throws {
        try await withApp { app in
            let observer = try await app.register()
            let observerID = try #require(UUID(uuidString: observer.id))
            var random = SeededRandom(seed: 11)
            try await seedOwners(app, around: GeoPoint(latitude: 52.52, longitude: 13.40), random: &random)
            for (radius, q) in [(5.0, nil), (12.0, nil), (12.0, "atlas"), (30.0, nil)] as [(Double, String?)] {
                var expected: [String] = []
                for try await (owner, distance, matching) in try await app.db.query(
                    Self.everyPinInTheRadius(radius, atlasOnly: q != nil, caller: observerID), logger: Self.logger)
                    .decode((UUID, Double, Int64).self) {
                    expected.append("\(owner.apiString) \(Nearby.rounded(distance)) \(matching)")
                }
                var got: [String] = []
                var cursor: String?
                repeat {
                    let path = "/v1/nearby/owners?latitude=52.52&longitude=13.40&radius_km=\(radius)&limit=3"
                        + (q.map { "&q=\($0)" } ?? "") + (cursor.map { "&cursor=\($0)" } ?? "")
                    let body = try await app.request(.get, path, token: observer.token).jsonObject()
                    for row in body["data"] as? [[String: Any]] ?? [] {
                        let user = row["user"] as? [String: Any]
                        got.append("\(user?["id"] as? String ?? "?") \(row["distance_km"] as? Double ?? -1) \(row["matching_copies"] as? Int ?? -1)")
                    }
                    cursor = body["next_cursor"] as? String
                } while cursor != nil
                #expect(expected.count > 8, "radius \(radius) q \(q ?? "-")")
                #expect(got == expected, "radius \(radius) q \(q ?? "-")")
            }
        }
    }

    private static let logger = Logger(label: "nearby-owners-test")

    /// The brute force: every available copy's pin (its own, or its owner's default pin for an
    /// unplaced copy) measured from the origin, grouped by owner, nearest first.
    private static func everyPinInTheRadius(_ radius: Double, atlasOnly: Bool, caller: UUID) -> PostgresQuery {
        """
        WITH placed AS (
            SELECT c.owner_id, c.book_id, p.public_latitude AS lat, p.public_longitude AS lon
            FROM copies c JOIN pins p ON p.id = c.pin_id WHERE c.status = 'available'
            UNION ALL
            SELECT c.owner_id, c.book_id, p.public_latitude, p.public_longitude
            FROM copies c JOIN pins p ON p.owner_id = c.owner_id AND p.is_default
            WHERE c.pin_id IS NULL AND c.status = 'available'
        ), measured AS (
            SELECT owner_id, bookworm_distance_km(52.52, 13.40, lat, lon) AS distance FROM placed
            WHERE owner_id <> \(caller) AND (NOT \(atlasOnly) OR book_id = '00000000-0000-0000-0000-00000000a71a')
        )
        SELECT owner_id, min(distance), count(*) FROM measured WHERE distance <= \(radius)
        GROUP BY owner_id ORDER BY min(distance), owner_id
        """
    }

    /// 120 owners around `centre`: a home pin each (the cell's centre, so neighbours tie), a
    /// meetup spot for every other one, and copies placed on either, unplaced (the home pin
    /// stands for them), reserved (never counted) or of another book (for `q`).
    private func seedOwners(_ app: TestApp, around centre: GeoPoint, random: inout SeededRandom) async throws {
        try await app.db.query("""
            INSERT INTO books (id, title, authors) VALUES
                ('00000000-0000-0000-0000-00000000a71a', 'Atlas of Rivers', ARRAY['Mercator']),
                ('00000000-0000-0000-0000-00000000b00c', 'Cookbook', ARRAY['Child'])
            """)
        for index in 0..<120 {
            let owner = UUID()
            try await app.db.query("""
                INSERT INTO users (id, email, email_normalized, username, password_hash)
                VALUES (\(owner), \("owner\(index)@example.org"), \("owner\(index)@example.org"), \("owner_\(index)"), 'unused')
                """)
            let home = GeoPoint(latitude: centre.latitude + random.double(in: -0.08...0.08),
                                longitude: centre.longitude + random.double(in: -0.12...0.12))
            let homePublic = PinKind.home.publicPoint(for: home)
            let homePin = try await insertPin(app, owner: owner, kind: "home", exact: home, public: homePublic, isDefault: true)
            var meetupPin: UUID?
            if index % 2 == 0 {
                let spot = GeoPoint(latitude: centre.latitude + random.double(in: -0.06...0.06),
                                    longitude: centre.longitude + random.double(in: -0.09...0.09))
                meetupPin = try await insertPin(app, owner: owner, kind: "meetup", exact: spot, public: spot, isDefault: false)
            }
            for copy in 0..<(index % 4) {
                let pin: UUID? = copy == 0 ? meetupPin : (copy == 1 ? homePin : nil)
                let book = index % 5 == 0 && copy == 0 ? "00000000-0000-0000-0000-00000000b00c" : "00000000-0000-0000-0000-00000000a71a"
                let status = index % 7 == 0 ? "reserved" : "available"
                try await app.db.query("""
                    INSERT INTO copies (owner_id, book_id, condition, status, pin_id)
                    VALUES (\(owner), \(book)::uuid, 'good', \(status), \(pin))
                    """)
            }
        }
        try await app.db.query("ANALYZE pins")
    }

    private func insertPin(_ app: TestApp, owner: UUID, kind: String, exact: GeoPoint, public point: GeoPoint, isDefault: Bool) async throws -> UUID {
        let id = UUID()
        try await app.db.query("""
            INSERT INTO pins (id, owner_id, label, kind, latitude, longitude, public_latitude, public_longitude, is_default)
            VALUES (\(id), \(owner), 'p', \(kind), \(exact.latitude), \(exact.longitude), \(point.latitude), \(point.longitude), \(isDefault))
            """)
        return id
    }
}
