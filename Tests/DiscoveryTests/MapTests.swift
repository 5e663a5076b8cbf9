import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Places
@testable import Discovery
@testable import BookwormTestSupport

@Suite struct MapTests {
    func markers(_ app: TestApp, _ query: String, token: String) async throws -> [[String: Any]] {
        try await app.request(.get, "/v1/map/pins?\(query)", token: token).jsonObject()["data"] as? [[String: Any]] ?? []
    }

    /// Inserts `count` pins of one owner around `centre` straight into the database.
    func scatter(_ app: TestApp, owner: String, count: Int, around centre: GeoPoint, spread: Double) async throws {
        let ownerID = try #require(UUID(uuidString: owner))
        try await app.db.query("""
            INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude)
            SELECT \(ownerID), 'p', 'meetup', lat, lon, lat, lon FROM (
                SELECT \(centre.latitude) + (random() - 0.5) * \(spread) AS lat,
                       \(centre.longitude) + (random() - 0.5) * \(spread) AS lon
                FROM generate_series(1, \(count))) AS points
            """)
    }

    @Test func fewPinsComeSinglyAtTheirPublicPoints() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let home = GeoPoint(latitude: 52.5213377, longitude: 13.4113377)
            try await app.addPin(owner.token, latitude: home.latitude, longitude: home.longitude)
            let found = try await markers(app, "bbox=13,52,14,53&zoom=12", token: owner.token)
            #expect(found.count == 1)
            let centre = Geo.cellCentre(of: home)
            #expect(abs((found.first?["latitude"] as? Double ?? 0) - centre.latitude) < 1e-9)
            #expect(found.first?["count"] as? Int == 1)
            #expect(try await markers(app, "bbox=0,0,1,1&zoom=12", token: owner.token).isEmpty)
        }
    }

    @Test func aBoxCanCrossTheAntimeridian() async throws {
        try await withApp { app in
            let owner = try await app.register()
            try await app.addPin(owner.token, label: "East", latitude: -17.5, longitude: 179.5, kind: "meetup")
            try await app.addPin(owner.token, label: "West", latitude: -17.5, longitude: -179.5, kind: "meetup")
            try await app.addPin(owner.token, label: "Far", latitude: -17.5, longitude: 0, kind: "meetup")
            let found = try await markers(app, "bbox=179,-20,-179,-15&zoom=8", token: owner.token)
            #expect(Set(found.compactMap { $0["longitude"] as? Double }) == [179.5, -179.5])
        }
    }

    @Test func densePinsAreClusteredAndCountsAddUp() async throws {
        try await withApp { app in
            let owner = try await app.register()
            try await scatter(app, owner: owner.id, count: 450, around: GeoPoint(latitude: 48.85, longitude: 2.35), spread: 0.2)
            let found = try await markers(app, "bbox=2.2,48.7,2.5,49.0&zoom=11", token: owner.token)
            #expect(found.count < 450)
            #expect(found.contains { ($0["count"] as? Int ?? 0) > 1 })
            #expect(found.reduce(0) { $0 + ($1["count"] as? Int ?? 0) } == 450)
        }
    }

    /// Single pins and clusters alike: a block hides each one's pins from the other only.
    @Test func blockingHidesEachOnesPinsFromTheOtherOnTheMap() async throws {
        try await withApp { app in
            let alice = try await app.register()
            let mallory = try await app.register()
            let carol = try await app.register()
            try await app.addPin(alice.token, latitude: 48.80, longitude: 2.30, kind: "meetup")
            try await app.addPin(carol.token, latitude: 48.82, longitude: 2.32, kind: "meetup")
            try await scatter(app, owner: mallory.id, count: 400, around: GeoPoint(latitude: 48.9, longitude: 2.4), spread: 0.1)
            func total(_ account: TestApp.Account, _ query: String) async throws -> Int {
                try await markers(app, query, token: account.token).reduce(0) { $0 + ($1["count"] as? Int ?? 0) }
            }
            let singles = "bbox=2.25,48.75,2.35,48.85&zoom=14", everything = "bbox=2.2,48.7,2.5,49.0&zoom=11"
            #expect(try await total(mallory, singles) == 2)
            #expect(try await total(alice, everything) == 402)

            #expect(try await app.request(.put, "/v1/users/\(mallory.username)/block", token: alice.token).status == .noContent)
            #expect(try await total(mallory, singles) == 1)
            #expect(try await total(mallory, everything) == 401)
            #expect(try await total(alice, everything) == 2)
            #expect(try await total(carol, everything) == 402)
        }
    }

    @Test func theWholeWorldIsBoundedOutput() async throws {
        try await withApp { app in
            let owner = try await app.register()
            var generator = SystemRandomNumberGenerator()
            for _ in 0..<12 {
                let centre = GeoPoint(latitude: .random(in: -60...60, using: &generator), longitude: .random(in: -170...170, using: &generator))
                try await scatter(app, owner: owner.id, count: 300, around: centre, spread: 8)
            }
            let found = try await markers(app, "bbox=-180,-90,180,90&zoom=22", token: owner.token)
            #expect(found.count <= MapRoutes.maxMarkers)
            #expect(found.reduce(0) { $0 + ($1["count"] as? Int ?? 0) } <= 3600)
        }
    }

    /// A box of the wrong shape breaks the schema (400); one out of range breaks a rule (422).
    @Test(arguments: [("bbox=1,2,3", 400), ("bbox=0,10,1,5", 422), ("bbox=0,0,200,1", 422), ("bbox=a,b,c,d", 400),
                      ("bbox=0,0,1,1&zoom=30", 400), ("zoom=3", 400), ("bbox=1e2,0,1,1", 400)])
    func badMapQueriesAreRefused(query: String, status: Int) async throws {
        try await withApp { app in
            let owner = try await app.register()
            #expect(try await app.request(.get, "/v1/map/pins?\(query)", token: owner.token).status.code == status)
        }
    }
}
