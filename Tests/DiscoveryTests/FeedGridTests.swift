import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Places
@testable import Discovery
@testable import BookwormTestSupport

/// The nearby feed reads posts by grid cell (migration 0017). Every page must hold exactly what a
/// measurement of every pin would: these compare it with that brute force, paging with a small
/// limit so the keyset cursor crosses cells.
@Suite struct FeedGridTests {
    @Test func gridCellsAgreeWithTheDatabaseToTheLastBit() async throws {
        try await withApp { app in
            var random = SeededRandom(seed: 7)
            var points: [(Double, Double)] = [(90, 180), (-90, -180), (0, 0), (51.5, -0.1), (-17.7, 179.95), (89.99, -179.99)]
            for _ in 0..<200 { points.append((random.double(in: -90...90), random.double(in: -180...180))) }
            for (latitude, longitude) in points {
                for step in [0.1, 1.0] {
                    let rows = try await app.db.query("SELECT bookworm_grid_cell(\(latitude), \(longitude), \(step))")
                    for try await cell in rows.decode(Int64.self) {
                        #expect(cell == FeedGrid.cell(latitude: latitude, longitude: longitude, step: step), "\(latitude), \(longitude)")
                    }
                }
            }
        }
    }

    @Test func aCellIsLeftOutOnlyWhenNoPointOfItIsInTheRadius() {
        var random = SeededRandom(seed: 3)
        var droppedSome = false
        for _ in 0..<300 {
            let origin = GeoPoint(latitude: random.double(in: -70...70), longitude: random.double(in: -180...180))
            let area = NearbyArea(origin: origin, radiusKm: random.double(in: 1...40))
            for box in Geo.boundingBoxes(around: origin, radiusKm: area.radiusKm) {
                let rows = FeedGrid.index(box.south + 90, 0.1)...FeedGrid.index(box.north + 90, 0.1)
                let columns = FeedGrid.index(box.west + 180, 0.1)...FeedGrid.index(box.east + 180, 0.1)
                for row in rows {
                    for column in columns where !FeedGrid.reaches(row: row, column: column, step: 0.1, area: area) {
                        droppedSome = true
                        // Points all over the cell, its edges and corners included: none is inside.
                        for i in 0...20 {
                            for j in 0...20 {
                                let point = GeoPoint(latitude: Double(row) * 0.1 - 90 + Double(i) * 0.005,
                                                     longitude: Double(column) * 0.1 - 180 + Double(j) * 0.005)
                                #expect(Geo.distanceKm(origin, point) > area.radiusKm, "\(origin) \(area.radiusKm) \(row) \(column)")
                            }
                        }
                    }
                }
            }
        }
        #expect(droppedSome)
    }

    @Test func nearbyFeedByCellsHoldsExactlyThePostsInTheRadiusNewestFirst() async throws {
        try await withApp { app in
            let viewer = try await app.register()
            var random = SeededRandom(seed: 42)
            let areas: [(GeoPoint, Double, String?)] = [
                (GeoPoint(latitude: 51.5, longitude: -0.12), 10, "cell"),
                (GeoPoint(latitude: 51.5, longitude: -0.12), 120, "region"),
                // Far more than 24 regions, and across the antimeridian.
                (GeoPoint(latitude: 48.9, longitude: 2.35), 450, "region"),
                (GeoPoint(latitude: -17.7, longitude: 179.95), 300, "region"),
                // More than 24 cells of 0.1 degree, no region mostly inside: still by cells.
                (GeoPoint(latitude: 51.45, longitude: -0.97), 25, "cell"),
                (GeoPoint(latitude: 51.5, longitude: -1.3), 60, "cell"),
                (GeoPoint(latitude: -17.7, longitude: 179.95), 10, "cell"),
                (GeoPoint(latitude: 89.95, longitude: 0), 10, nil),
                // No cell mostly inside: read by the clipped cells' points (`pointsSQL`).
                (GeoPoint(latitude: 51.5, longitude: -0.12), 1.5, "cell"),
            ]
            #expect(FeedGrid.covering(NearbyArea(origin: areas[8].0, radiusKm: areas[8].1))?.inner.isEmpty == true)
            let wide = try #require(FeedGrid.covering(NearbyArea(origin: areas[4].0, radiusKm: areas[4].1)))
            #expect(wide.inner.count + wide.edge.count > 24)
            let widest = try #require(FeedGrid.covering(NearbyArea(origin: areas[2].0, radiusKm: areas[2].1)))
            #expect(widest.inner.count + widest.edge.count > 24)
            for (origin, radius, level) in areas {
                #expect(FeedGrid.covering(NearbyArea(origin: origin, radiusKm: radius))?.level.column == level)
                try await seedPosts(app, around: origin, spreadKm: radius * 2.5, random: &random)
            }
            for (origin, radius, _) in areas {
                let base = "/v1/posts?latitude=\(origin.latitude)&longitude=\(origin.longitude)&radius_km=\(radius)"
                let all = try await app.feedIDs(base, token: viewer.token, limit: 7)
                let expected = try await app.feedIDsByBruteForce(origin: origin, radiusKm: radius, kind: nil)
                #expect(expected.count > 10)
                #expect(all == expected, "\(origin) \(radius) km")
                let offers = try await app.feedIDs(base + "&kind=offer", token: viewer.token, limit: 7)
                #expect(offers == (try await app.feedIDsByBruteForce(origin: origin, radiusKm: radius, kind: "offer")))
            }
        }
    }

    @Test func aPostFollowsItsPinWhenItMovesAndLeavesTheNearbyFeedWhenItIsDeleted() async throws {
        try await withApp { app in
            let viewer = try await app.register()
            let alice = try await app.register()
            let pin = try #require(try await app.addPin(alice.token, label: "Cafe", latitude: 52.52, longitude: 13.405,
                                                        kind: "meetup")["id"] as? String)
            let post = try #require(try await app.addPost(alice.token, body: "Books at the cafe")["id"] as? String)
            let berlin = "/v1/posts?latitude=52.52&longitude=13.40&radius_km=5"
            let paris = "/v1/posts?latitude=48.857&longitude=2.352&radius_km=5"
            #expect(try await app.feedIDs(berlin, token: viewer.token) == [post])
            let moved = try await app.request(.patch, "/v1/me/pins/\(pin)", json: ["latitude": 48.857, "longitude": 2.352], token: alice.token)
            #expect(moved.status == .ok)
            #expect(try await app.feedIDs(berlin, token: viewer.token).isEmpty)
            #expect(try await app.feedIDs(paris, token: viewer.token) == [post])
            #expect(try await app.request(.delete, "/v1/me/pins/\(pin)", token: alice.token).status == .noContent)
            #expect(try await app.feedIDs(paris, token: viewer.token).isEmpty)
            #expect(try await app.feedIDs("/v1/posts").contains(post))
        }
    }

    /// Meetup pins (public point = exact point) scattered around `origin`, several posts on each;
    /// every third post shares one timestamp, so ties are broken by id across cells.
    private func seedPosts(_ app: TestApp, around origin: GeoPoint, spreadKm: Double, random: inout SeededRandom) async throws {
        let author = try #require(UUID(uuidString: try await app.register().id))
        let degrees = spreadKm / 111.195
        for index in 0..<60 {
            let latitude = max(-90, min(90, origin.latitude + random.double(in: -degrees...degrees)))
            var longitude = origin.longitude + random.double(in: -degrees...degrees) / max(0.05, cos(origin.latitude * .pi / 180))
            longitude = longitude > 180 ? longitude - 360 : (longitude < -180 ? longitude + 360 : longitude)
            longitude = max(-180, min(180, longitude))
            let latitude9 = (latitude * 1e9).rounded() / 1e9, longitude9 = (longitude * 1e9).rounded() / 1e9
            let rows = try await app.db.query("""
                INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude)
                VALUES (\(author), \("spot \(index)"), 'meetup', \(latitude9), \(longitude9), \(latitude9), \(longitude9))
                RETURNING id
                """)
            for try await pin in rows.decode(UUID.self) {
                for post in 0..<3 {
                    let kind = post == 1 ? "wanted" : "offer"
                    try await app.db.query("""
                        INSERT INTO posts (author_id, kind, body, pin_id, created_at)
                        VALUES (\(author), \(kind), 'near', \(pin),
                                CASE WHEN \(post) = 2 THEN timestamptz '2026-01-01' ELSE clock_timestamp() END)
                        """)
                }
            }
        }
    }
}
