import Foundation
import Testing
@testable import Discovery
@testable import Places
@testable import BookwormTestSupport

/// Wide radii read 1° regions; a region also holds whatever dense city lies beside the circle.
@Suite struct FeedGridRegionTests {
    /// The circle's edge clips a region whose city, all newer posts, lies outside it: the region
    /// is read through `RegionFeedSQL.scanCap` posts, then by the cells the circle reaches, so
    /// the few posts inside still make the page and the city is not read to its end.
    @Test func aRegionClippedBesideADenseCityIsReadOnByTheCellsTheCircleReaches() async throws {
        try await withApp { app in
            let viewer = try await app.register()
            let origin = GeoPoint(latitude: 51.5, longitude: -3.0)
            // Just wide enough for a point in the corner of its cell nearest the origin: the
            // cells read past the cap must include a cell whose centre is outside the radius.
            let corner = GeoPoint(latitude: 51.49999, longitude: -0.89999)
            let radius = Geo.distanceKm(origin, corner) + 0.01
            let area = NearbyArea(origin: origin, radiusKm: radius)
            let covering = try #require(FeedGrid.covering(area))
            let cityRegion = FeedGrid.cell(latitude: 51.5, longitude: -0.5, step: 1.0)
            #expect(covering.level.column == "region" && covering.edge.contains(cityRegion))
            #expect(Geo.distanceKm(origin, GeoPoint(latitude: 51.5, longitude: -0.5)) > radius)
            #expect(Geo.distanceKm(origin, GeoPoint(latitude: 51.45, longitude: -0.85)) > radius)
            // (latitude, longitude, posts, first post's seconds after noon, seconds between
            // posts): the city 173 km away; in its region, two at the corner, older than the
            // city, so the first page needs them, and three older still 142 km away; four at
            // the origin.
            let read = try await seedAndCountRead(app, [(51.5, -0.5, 3000, 1000.0, 0.1), (51.5, -0.95, 3, -10.0, 50.0),
                                                        (corner.latitude, corner.longitude, 2, 500.0, 10.0), (51.5, -3.0, 4, -5.0, 1.0)],
                                                  area: area, viewer: viewer)
            #expect(read > RegionFeedSQL.scanCap && read <= RegionFeedSQL.scanCap + 100, "\(read) posts read")
            let expected = try await app.feedIDsByBruteForce(origin: origin, radiusKm: radius, kind: nil)
            #expect(expected.count == 9)
            let base = "/v1/posts?latitude=51.5&longitude=-3.0&radius_km=\(radius)"
            #expect(try await app.feedIDs(base, token: viewer.token, limit: 5) == expected)
            #expect(try await app.feedIDs(base, token: viewer.token, limit: 2) == expected)
        }
    }

    /// A region mostly inside the circle, its city in the corner outside: read, before, until it
    /// had a page inside, which was to the city's end. Now the same cap, then its cells.
    @Test func anInnerRegionWithItsCityOutsideTheCircleIsNotReadThroughTheCity() async throws {
        try await withApp { app in
            let viewer = try await app.register()
            let origin = GeoPoint(latitude: 51.5, longitude: -2.2)
            let area = NearbyArea(origin: origin, radiusKm: 140)
            let covering = try #require(FeedGrid.covering(area))
            #expect(covering.level.column == "region" && covering.inner.contains(FeedGrid.cell(latitude: 51.5, longitude: -0.5, step: 1.0)))
            #expect(Geo.distanceKm(origin, GeoPoint(latitude: 51.95, longitude: -0.05)) > 140)
            let read = try await seedAndCountRead(app, [(51.95, -0.05, 3000, 1000.0, 0.1), (51.5, -0.5, 3, -10.0, 50.0),
                                                        (51.5, -2.2, 4, -5.0, 1.0)], area: area, viewer: viewer)
            #expect(read > RegionFeedSQL.scanCap && read <= RegionFeedSQL.scanCap + 100, "\(read) posts read")
            let expected = try await app.feedIDsByBruteForce(origin: origin, radiusKm: 140, kind: nil)
            #expect(expected.count == 7)
            #expect(try await app.feedIDs("/v1/posts?latitude=51.5&longitude=-2.2&radius_km=140", token: viewer.token, limit: 3) == expected)
        }
    }

    /// Seeds each (latitude, longitude, posts, first post's seconds after noon, seconds between
    /// posts) pin, then counts the posts a first page of 5 reads on its generic plan.
    private func seedAndCountRead(_ app: TestApp, _ pins: [(Double, Double, Int, Double, Double)], area: NearbyArea,
                                  viewer: TestApp.Account) async throws -> Int {
        let author = try #require(UUID(uuidString: try await app.register().id))
        for (latitude, longitude, count, newest, step) in pins {
            try await app.postsAtOnePin(author: author, latitude: latitude, longitude: longitude, count: count, newest: newest, step: step)
        }
        try await app.db.query("VACUUM ANALYZE posts")
        var filter = FeedFilter()
        filter.near = area
        filter.viewerID = try #require(UUID(uuidString: viewer.id))
        return try await app.postsReadOnGenericPlan(filter, limit: 5, after: nil)
    }
}
