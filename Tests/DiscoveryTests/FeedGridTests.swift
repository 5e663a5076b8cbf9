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
                (GeoPoint(latitude: 51.5, longitude: -0.12), 60, "region"),
                (GeoPoint(latitude: -17.7, longitude: 179.95), 10, "cell"),
                (GeoPoint(latitude: 89.95, longitude: 0), 10, nil),
                // No cell mostly inside: read by the clipped cells' points (`pointsSQL`).
                (GeoPoint(latitude: 51.5, longitude: -0.12), 1.5, "cell"),
            ]
            #expect(FeedGrid.covering(NearbyArea(origin: areas[4].0, radiusKm: areas[4].1))?.inner.isEmpty == true)
            for (origin, radius, level) in areas {
                #expect(FeedGrid.covering(NearbyArea(origin: origin, radiusKm: radius))?.level.column == level)
                try await seedPosts(app, around: origin, spreadKm: radius * 2.5, random: &random)
            }
            for (origin, radius, _) in areas {
                let base = "/v1/posts?latitude=\(origin.latitude)&longitude=\(origin.longitude)&radius_km=\(radius)"
                let all = try await app.feedIDs(base, token: viewer.token, limit: 7)
                let expected = try await bruteForce(app, origin: origin, radiusKm: radius, kind: nil)
                #expect(expected.count > 10)
                #expect(all == expected, "\(origin) \(radius) km")
                let offers = try await app.feedIDs(base + "&kind=offer", token: viewer.token, limit: 7)
                #expect(offers == (try await bruteForce(app, origin: origin, radiusKm: radius, kind: "offer")))
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
                let read = try await postsReadOnGenericPlan(app, filter, limit: 6, after: after)
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
                try await app.db.query("""
                    WITH pin AS (
                        INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude)
                        VALUES (\(author), 'p', 'meetup', \(latitude), -0.15, \(latitude), -0.15) RETURNING id)
                    INSERT INTO posts (author_id, kind, body, pin_id, created_at)
                    SELECT \(author), 'offer', 'x', pin.id, timestamptz '2026-06-01 12:00' + (\(newest) - i * \(step)) * interval '1 second'
                    FROM pin CROSS JOIN generate_series(0, \(count) - 1) AS i
                    """)
            }
            try await app.db.query("VACUUM ANALYZE posts")
            var filter = FeedFilter()
            filter.near = area
            filter.viewerID = try #require(UUID(uuidString: viewer.id))
            // The page of 6 reaches back 5 s; the edge cell has 1,050 posts in the 105 s since.
            let read = try await postsReadOnGenericPlan(app, filter, limit: 6, after: nil)
            #expect(read > 0 && read <= 1_200, "\(read) posts read")
            let base = "/v1/posts?latitude=51.55&longitude=-0.15&radius_km=6"
            let expected = try await bruteForce(app, origin: origin, radiusKm: 6, kind: nil)
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
                try await app.db.query("""
                    WITH pin AS (
                        INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude)
                        VALUES (\(author), 'p', 'meetup', \(latitude), -0.15, \(latitude), -0.15) RETURNING id)
                    INSERT INTO posts (author_id, kind, body, pin_id, created_at)
                    SELECT \(author), 'offer', 'x', pin.id, timestamptz '2026-06-01 12:00' + (\(newest) - i * 0.1) * interval '1 second'
                    FROM pin CROSS JOIN generate_series(0, \(count) - 1) AS i
                    """)
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
            let read = try await postsReadOnGenericPlan(app, filter, limit: 4, after: nil)
            #expect(read > 0 && read <= 20, "\(read) posts read")
            let expected = try await bruteForce(app, origin: origin, radiusKm: 0.5, kind: nil)
            #expect(expected.count == 5)
            #expect(try await app.feedIDs("/v1/posts?latitude=51.55&longitude=-0.15&radius_km=0.5", token: viewer.token, limit: 4) == expected)
        }
    }

    private static let logger = Logger(label: "feed-grid-test")

    /// Posts (index entries or rows) the grid read's generic plan touches for one page.
    private func postsReadOnGenericPlan(_ app: TestApp, _ filter: FeedFilter, limit: Int, after: Cursor?) async throws -> Int {
        let (statement, grid) = PostsStore.listPlan(filter, limit: limit, after: after)
        #expect(grid != nil)
        let area = try #require(filter.near)
        let covering = try #require(FeedGrid.covering(area))
        let kindText: String = filter.kind.map { "'\($0.rawValue)'" } ?? "NULL"
        let micros: String = after.map { "\($0.micros)" } ?? "NULL"
        let id: String = after.map { "'\($0.id.uuidString)'" } ?? "NULL"
        func list(_ cells: [Int64]) -> String { "'{" + cells.map { String($0) }.joined(separator: ",") + "}'" }
        let band: [String] = PostsStore.bandValues(area).map { value in
            if case .double(let degrees?) = value { return "\(degrees)" }
            return "NULL"
        }
        let viewer = filter.viewerID.map { "'\($0.uuidString)'" } ?? "NULL"
        let arguments: [String] = [kindText, "NULL", "NULL", micros, id, "\(limit)", viewer, "\(area.origin.latitude)",
                                   "\(area.origin.longitude)", "\(area.radiusKm)", list(covering.inner)] + band + [list(covering.edge)]
        return try await app.db.withConnection { connection in
            try await connection.query("SET plan_cache_mode = force_generic_plan", logger: Self.logger)
            try await connection.query(PostgresQuery(unsafeSQL: """
                PREPARE grid_plan(text, text, uuid, int8, uuid, int8, uuid, float8, float8, float8, int8[],
                                  float8, float8, float8, float8, float8, float8, int8[]) AS \(statement.sql)
                """), logger: Self.logger)
            var plan = ""
            for try await text in try await connection.query(PostgresQuery(unsafeSQL: """
                EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE grid_plan(\(arguments.joined(separator: ", ")))
                """), logger: Self.logger).decode(String.self) { plan += text }
            try await connection.query("DEALLOCATE grid_plan", logger: Self.logger)
            try await connection.query("RESET plan_cache_mode", logger: Self.logger)
            return PlanRows.read("posts", in: try JSONSerialization.jsonObject(with: Data(plan.utf8)))
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

    /// Every post whose pin's public point is within the radius, measured pin by pin.
    private func bruteForce(_ app: TestApp, origin: GeoPoint, radiusKm: Double, kind: String?) async throws -> [String] {
        let rows = try await app.db.query("""
            SELECT po.id FROM posts po JOIN pins p ON p.id = po.pin_id
            WHERE bookworm_distance_km(\(origin.latitude), \(origin.longitude), p.public_latitude, p.public_longitude) <= \(radiusKm)
              AND (\(kind)::text IS NULL OR po.kind = \(kind))
            ORDER BY po.created_at DESC, po.id DESC
            """)
        var ids: [String] = []
        for try await id in rows.decode(UUID.self) { ids.append(id.apiString) }
        return ids
    }
}
