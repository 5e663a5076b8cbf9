import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Places
@testable import Discovery
@testable import BookwormTestSupport

/// Dense cells: a page reads only what it needs of a cell full of posts, whatever its shape.
@Suite struct FeedGridDenseCellTests {
    private static let logger = Logger(label: "feed-grid-test")

    /// A pooled connection keeps one generic plan per prepared statement after a few runs. For
    /// every shape of grid read, that plan must read a dense cell only as far as the page needs,
    /// not every post in it (the `$1 IS NULL OR …` text once made it read and sort them all).
    @Test func everyGridReadsGenericPlanStopsAtThePageInADenseCell() async throws {
        try await withApp { app in
            let author = try #require(UUID(uuidString: try await app.register().id))
            let viewer = try #require(UUID(uuidString: try await app.register().id))
            let pins = try await app.db.query("""
                INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude)
                VALUES (\(author), 'Dense', 'meetup', 51.5, -0.12, 51.5, -0.12) RETURNING id
                """)
            for try await pin in pins.decode(UUID.self) {
                try await app.db.query("""
                    INSERT INTO posts (author_id, kind, body, pin_id, created_at)
                    SELECT \(author), CASE WHEN i % 2 = 0 THEN 'offer' ELSE 'wanted' END, 'dense ' || i, \(pin),
                           timestamptz '2026-06-01' - i * interval '1 second'
                    FROM generate_series(1, 3000) AS i
                    """)
            }
            // Posts in 500 other cells, as in a real service, so statistics know a cell is a small part.
            try await app.db.query("""
                INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude)
                SELECT \(author), 'Spread', 'meetup', -60 + (i % 25) * 5, -170 + (i / 25) * 17, -60 + (i % 25) * 5, -170 + (i / 25) * 17
                FROM generate_series(0, 499) AS i
                """)
            try await app.db.query("""
                INSERT INTO posts (author_id, kind, body, pin_id)
                SELECT \(author), 'offer', 'far', p.id FROM pins p CROSS JOIN generate_series(1, 8) WHERE p.label = 'Spread'
                """)
            try await app.db.query("ANALYZE posts")
            let cursor = Cursor(micros: (1_780_272_000 - 1_500) * 1_000_000, id: UUID())  // halfway down the dense cell
            for (kind, after) in [(nil, nil), (PostKind.offer, nil), (nil, cursor), (PostKind.offer, cursor)] as [(PostKind?, Cursor?)] {
                var filter = FeedFilter()
                filter.near = NearbyArea(origin: GeoPoint(latitude: 51.5, longitude: -0.12), radiusKm: 5)
                filter.kind = kind
                filter.viewerID = viewer
                let read = try await app.postsReadOnGenericPlan(filter, limit: 6, after: after)
                #expect(read > 0 && read <= 60, "kind \(String(describing: kind)), cursor \(after != nil): \(read) posts read")
            }
            // And the server runs that plan from the first request, rather than planning each one.
            var london = FeedFilter()
            london.near = NearbyArea(origin: GeoPoint(latitude: 51.5, longitude: -0.12), radiusKm: 5)
            let filter = london
            let store = PostsStore(client: app.db, logger: Self.logger)
            let plans = try await app.db.transaction(logger: Self.logger) { connection in
                let page = try await store.list(filter, limit: 6, after: nil, on: connection)
                var plans: [(Int, Int)] = []
                for try await row in try await connection.query("""
                    SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name LIKE 'bookworm_feed_grid_%'
                    """, logger: Self.logger).decode((Int, Int).self) { plans.append(row) }
                return page.count == 6 ? plans : []
            }
            #expect(plans.count == 1 && plans.allSatisfy { $0.0 == 1 && $0.1 == 0 }, "\(plans)")
        }
    }

    /// A dense cell the circle only clips is read back to the page the inner cells fill, not to
    /// its end; and what little of it is inside the circle still makes the page in its place.
    @Test func anEdgeCellIsReadOnlyBackToTheInnerCellsPage() async throws {
        try await withApp { app in
            let author = try #require(UUID(uuidString: try await app.register().id))
            let viewer = try await app.register()
            let origin = GeoPoint(latitude: 51.55, longitude: -0.15)
            let area = NearbyArea(origin: origin, radiusKm: 6)
            let covering = try #require(FeedGrid.covering(area))
            let north = FeedGrid.cell(latitude: 51.65, longitude: -0.15, step: 0.1)
            #expect(covering.edge.contains(north) && covering.inner.contains(FeedGrid.cell(latitude: 51.55, longitude: -0.15, step: 0.1)))
            // (latitude, posts, first post's seconds after noon, seconds between posts)
            for (latitude, count, newest, step) in [(51.55, 30, 0.0, 1.0), (51.65, 3000, 100.0, 0.1), (51.602, 3, -2.5, 50.0)] {
                try await app.postsAtOnePin(author: author, latitude: latitude, count: count, newest: newest, step: step)
            }
            try await app.db.query("VACUUM ANALYZE posts")
            var filter = FeedFilter()
            filter.near = area
            filter.viewerID = try #require(UUID(uuidString: viewer.id))
            // The page of 6 reaches back 5 s; the edge cell has 1,050 posts in the 105 s since.
            let read = try await app.postsReadOnGenericPlan(filter, limit: 6, after: nil)
            #expect(read > 0 && read <= 1_200, "\(read) posts read")
            let base = "/v1/posts?latitude=51.55&longitude=-0.15&radius_km=6"
            let expected = try await app.feedIDsByBruteForce(origin: origin, radiusKm: 6, kind: nil)
            #expect(expected.count == 33)
            #expect(try await app.feedIDs(base, token: viewer.token, limit: 6) == expected)
        }
    }

    /// A radius no cell lies mostly inside, beside a public point with thousands of posts just
    /// outside it in the same cell: the page reads the posts of the points inside, not the cell.
    @Test func aSmallRadiusReadsThePointsInsideItNotTheDenseCellItClips() async throws {
        try await withApp { app in
            let author = try #require(UUID(uuidString: try await app.register().id))
            let viewer = try await app.register()
            let origin = GeoPoint(latitude: 51.55, longitude: -0.15)
            let area = NearbyArea(origin: origin, radiusKm: 0.5)
            let covering = try #require(FeedGrid.covering(area))
            #expect(covering.level.column == "cell" && covering.inner.isEmpty)
            // (latitude, posts, first post's seconds after noon): 0.6 km north is outside, and
            // its 3,000 posts are all newer than the 5 inside.
            for (latitude, count, newest) in [(51.5554, 3000, 1000.0), (51.5518, 3, 0.0), (51.5482, 2, -10.0)] {
                try await app.postsAtOnePin(author: author, latitude: latitude, count: count, newest: newest, step: 0.1)
            }
            // Elsewhere, as in any real table, posts sit at hundreds of other public points, so
            // the planner knows a point holds few of them.
            try await app.db.query("""
                WITH pin AS (
                    INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude)
                    SELECT \(author), 'far', 'meetup', 40 + i * 0.01, 10, 40 + i * 0.01, 10 FROM generate_series(1, 400) AS i
                    RETURNING id)
                INSERT INTO posts (author_id, kind, body, pin_id, created_at)
                SELECT \(author), 'offer', 'far', pin.id, timestamptz '2026-06-01 13:00' FROM pin
                """)
            try await app.db.query("VACUUM ANALYZE posts")
            var filter = FeedFilter()
            filter.near = area
            filter.viewerID = try #require(UUID(uuidString: viewer.id))
            let read = try await app.postsReadOnGenericPlan(filter, limit: 4, after: nil)
            #expect(read > 0 && read <= 20, "\(read) posts read")
            let expected = try await app.feedIDsByBruteForce(origin: origin, radiusKm: 0.5, kind: nil)
            #expect(expected.count == 5)
            #expect(try await app.feedIDs("/v1/posts?latitude=51.55&longitude=-0.15&radius_km=0.5", token: viewer.token, limit: 4) == expected)
        }
    }
}
