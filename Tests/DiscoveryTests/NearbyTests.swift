import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Places
@testable import BookwormTestSupport

extension TestApp {
    /// Every row of a nearest-first list, following cursors.
    func allNearby(_ path: String, token: String, limit: Int = 100) async throws -> [[String: Any]] {
        var rows: [[String: Any]] = []
        var cursor: String?
        repeat {
            let url = path + "&limit=\(limit)" + (cursor.map { "&cursor=\($0)" } ?? "")
            let body = try await request(.get, url, token: token).jsonObject()
            rows += body["data"] as? [[String: Any]] ?? []
            cursor = body["next_cursor"] as? String
        } while cursor != nil
        return rows
    }
}

@Suite struct NearbyTests {
    @Test func nearbyCopiesMatchABruteForceReferenceIncludingAntimeridianAndPoles() async throws {
        try await withApp { app in
            let observer = try await app.register()
            let owner = try await app.register()
            let ownerID = try #require(UUID(uuidString: owner.id))
            var generator = SystemRandomNumberGenerator()
            let centres = [GeoPoint(latitude: 52.52, longitude: 13.40), GeoPoint(latitude: -17.7, longitude: 179.95),
                           GeoPoint(latitude: 89.98, longitude: 0), GeoPoint(latitude: -89.97, longitude: 45)]
            var pins: [(id: UUID, publicPoint: GeoPoint)] = []
            for index in 0..<2000 {
                let centre = centres[index % centres.count]
                var lon = centre.longitude + .random(in: -0.6...0.6, using: &generator)
                if lon > 180 { lon -= 360 } else if lon < -180 { lon += 360 }
                let exact = GeoPoint(latitude: min(90, max(-90, centre.latitude + .random(in: -0.15...0.15, using: &generator))), longitude: lon)
                let kind: PinKind = index % 2 == 0 ? .home : .meetup
                pins.append((UUID(), kind.publicPoint(for: exact)))
                try await app.db.query("""
                    INSERT INTO pins (id, owner_id, label, kind, latitude, longitude, public_latitude, public_longitude)
                    VALUES (\(pins[index].id), \(ownerID), 'p', \(kind.rawValue), \(exact.latitude), \(exact.longitude),
                            \(pins[index].publicPoint.latitude), \(pins[index].publicPoint.longitude))
                    """)
            }
            try await app.db.query("""
                INSERT INTO books (id, title, authors) VALUES ('00000000-0000-0000-0000-000000000001', 'Atlas', ARRAY['Mercator'])
                """)
            try await app.db.query("""
                INSERT INTO copies (owner_id, book_id, condition, pin_id)
                SELECT \(ownerID), '00000000-0000-0000-0000-000000000001', 'good', id FROM pins
                """)
            var copyOfPin: [UUID: String] = [:]
            for try await (copy, pin) in try await app.db.query("SELECT id, pin_id FROM copies").decode((UUID, UUID).self) {
                copyOfPin[pin] = copy.apiString
            }
            for origin in centres + [GeoPoint(latitude: -17.7, longitude: -179.9)] {
                for radius in [5.0, 20.0, 60.0] {
                    let path = "/v1/nearby/copies?latitude=\(origin.latitude)&longitude=\(origin.longitude)&radius_km=\(radius)"
                    let got = try await app.allNearby(path, token: observer.token).compactMap { $0["id"] as? String }
                    let expected = pins.map { ($0.id, Geo.distanceKm(origin, $0.publicPoint)) }
                        .filter { abs($0.1 - radius) > 1e-6 && $0.1 <= radius }
                    let gotSet = got.filter { id in !pins.contains { copyOfPin[$0.id] == id && abs(Geo.distanceKm(origin, $0.publicPoint) - radius) <= 1e-6 } }
                    // Same ids in the same order: nearest first, ties (a cell's homes) by copy id.
                    // Places at the same distance in theory (cells mirrored about the origin's
                    // meridian) differ in the last bits, in the server's chords as in this
                    // haversine, so within a micrometre either order is nearest first.
                    let expectedPairs = expected.compactMap { pin in copyOfPin[pin.0].map { ($0, pin.1) } }
                    let expectedIDs = expectedPairs.sorted { ($0.1, $0.0) < ($1.1, $1.0) }.map(\.0)
                    #expect(Self.sameOrderUpToFloatTies(gotSet, expectedIDs, distance: Dictionary(uniqueKeysWithValues: expectedPairs)),
                            "origin \(origin) radius \(radius)")
                    if radius == 60 { #expect(expectedIDs.count > 100) }
                }
            }
        }
    }

    /// `got` holds exactly `expected`'s ids, in its order but for ids whose distances are within
    /// a micrometre of each other.
    static func sameOrderUpToFloatTies(_ got: [String], _ expected: [String], distance: [String: Double]) -> Bool {
        guard got.count == expected.count, Set(got) == Set(expected) else { return false }
        return zip(got, expected).allSatisfy { pair in
            pair.0 == pair.1 || abs((distance[pair.0] ?? -1) - (distance[pair.1] ?? 1)) <= 1e-9
        }
    }

    /// Sixty homes in one cell share its centre, so their copies tie on distance: they must
    /// come by copy id, across small pages, before anything farther, with nothing lost.
    @Test func copiesTiedAtOnePointComeInIdOrderAcrossPages() async throws {
        try await withApp { app in
            let observer = try await app.register()
            let owner = try await app.register()
            let ownerID = try #require(UUID(uuidString: owner.id))
            let centre = Geo.cellCentre(of: GeoPoint(latitude: 35.6895, longitude: 139.6917))
            var publicPoints: [UUID: GeoPoint] = [:]
            for index in 0..<80 {
                let tied = index < 60
                let point = tied ? centre : GeoPoint(latitude: centre.latitude + 0.02 + Double(index % 7) * 0.003, longitude: centre.longitude)
                let pin = UUID()
                publicPoints[pin] = point
                try await app.db.query("""
                    INSERT INTO pins (id, owner_id, label, kind, latitude, longitude, public_latitude, public_longitude)
                    VALUES (\(pin), \(ownerID), 'p', \(tied ? "home" : "meetup"), \(point.latitude + (tied ? 0.001 : 0)), \(point.longitude),
                            \(point.latitude), \(point.longitude))
                    """)
            }
            try await app.db.query("INSERT INTO books (id, title, authors) VALUES ('00000000-0000-0000-0000-000000000002', 'Tie', ARRAY['Knot'])")
            try await app.db.query("""
                INSERT INTO copies (owner_id, book_id, condition, pin_id)
                SELECT \(ownerID), '00000000-0000-0000-0000-000000000002', 'good', id FROM pins, generate_series(1, 2)
                """)
            var expected: [(id: String, distance: Double)] = []
            for try await (copy, pin) in try await app.db.query("SELECT id, pin_id FROM copies").decode((UUID, UUID).self) {
                expected.append((copy.apiString, Geo.distanceKm(centre, try #require(publicPoints[pin]))))
            }
            expected.sort { ($0.distance, $0.id) < ($1.distance, $1.id) }
            let path = "/v1/nearby/copies?latitude=\(centre.latitude)&longitude=\(centre.longitude)&radius_km=20"
            let got = try await app.allNearby(path, token: observer.token, limit: 7).compactMap { $0["id"] as? String }
            #expect(got == expected.map(\.id))
            #expect(got.count == 160)
        }
    }

    @Test func antimeridianQueryFindsThePinAcrossIt() async throws {
        try await withApp { app in
            let observer = try await app.register()
            let owner = try await app.register()
            try await app.addPin(owner.token, label: "Fiji market", latitude: -17.7, longitude: -179.9, kind: "meetup")
            try await app.addCopy(owner.token)
            let rows = try await app.allNearby("/v1/nearby/copies?latitude=-17.7&longitude=179.9&radius_km=25", token: observer.token)
            #expect(rows.count == 1)
            let distance = try #require(rows.first?["distance_km"] as? Double)
            #expect(abs(distance - 21.2) < 0.2)
        }
    }

    @Test func radiusEdgeIncludesAtAndExcludesJustBeyond() async throws {
        try await withApp { app in
            let observer = try await app.register()
            let owner = try await app.register()
            try await app.addPin(owner.token, label: "Café", latitude: 0.1, longitude: 0, kind: "meetup")
            try await app.addCopy(owner.token)
            let exact = Geo.distanceKm(GeoPoint(latitude: 0, longitude: 0), GeoPoint(latitude: 0.1, longitude: 0))
            let inside = try await app.allNearby("/v1/nearby/copies?latitude=0&longitude=0&radius_km=\(exact + 0.001)", token: observer.token)
            let outside = try await app.allNearby("/v1/nearby/copies?latitude=0&longitude=0&radius_km=\(exact - 0.001)", token: observer.token)
            #expect(inside.count == 1)
            #expect(outside.isEmpty)
        }
    }

    @Test func unplacedCopiesUseTheOwnersDefaultPinAndOwnCopiesAreLeftOut() async throws {
        try await withApp { app in
            let observer = try await app.register()
            let owner = try await app.register()
            let pinless = try await app.register()
            try await app.addCopy(pinless.token)
            try await app.addCopy(owner.token)
            try await app.addPin(owner.token, latitude: 52.52, longitude: 13.40)
            try await app.addPin(observer.token, latitude: 52.52, longitude: 13.40)
            try await app.addCopy(observer.token)
            let rows = try await app.allNearby("/v1/nearby/copies?latitude=52.52&longitude=13.40", token: observer.token)
            #expect(rows.count == 1)
            #expect((rows.first?["owner"] as? [String: Any])?["username"] as? String == owner.username)
            let owners = try await app.allNearby("/v1/nearby/owners?latitude=52.52&longitude=13.40", token: observer.token)
            #expect(owners.count == 1)
            #expect(owners.first?["matching_copies"] as? Int == 1)
        }
    }

    @Test(arguments: ["longitude=13", "latitude=91&longitude=0", "latitude=0&longitude=0&radius_km=0",
                      "latitude=0&longitude=0&radius_km=500.1", "latitude=nan&longitude=0", "latitude=0&longitude=0&cursor=zzz"])
    func badNearbyQueriesAre400(query: String) async throws {
        try await withApp { app in
            let observer = try await app.register()
            let response = try await app.request(.get, "/v1/nearby/copies?\(query)", token: observer.token)
            #expect(response.status == .badRequest, "\(query)")
        }
    }
}
