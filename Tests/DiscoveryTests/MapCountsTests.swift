import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Discovery
@testable import BookwormTestSupport

/// Map clusters are summed from `pin_spots`: per ~1 km square, the count and the sums of the shown
/// pins' public points, kept by the database. These tests hold them against a recount of the
/// pins after every kind of change.
@Suite struct MapCountsTests {
    /// Spots whose kept count or sums differ from the shown pins in them, counted afresh.
    func drift(_ app: TestApp) async throws -> Int {
        try await app.count("""
            SELECT count(*)::int8
            FROM (SELECT spot, pins, latitude_sum, longitude_sum FROM pin_spots WHERE pins > 0) AS kept
            FULL JOIN (
                SELECT bookworm_map_spot(public_latitude, public_longitude) AS spot, count(*)::int AS pins,
                       sum(public_latitude) AS latitude_sum, sum(public_longitude) AS longitude_sum
                FROM pins p
                WHERE NOT EXISTS (SELECT 1 FROM users su WHERE su.id = p.owner_id AND su.suspended_at IS NOT NULL)
                GROUP BY 1) AS recount USING (spot)
            WHERE kept.pins IS DISTINCT FROM recount.pins
               OR abs(kept.latitude_sum - recount.latitude_sum) > 1e-6 OR abs(kept.longitude_sum - recount.longitude_sum) > 1e-6
            """, user: "")
    }

    func total(_ app: TestApp, _ token: String) async throws -> Int {
        let markers = try await app.request(.get, "/v1/map/pins?bbox=13,52,14,53&zoom=10", token: token).jsonObject()["data"] as? [[String: Any]]
        return markers?.reduce(0) { $0 + ($1["count"] as? Int ?? 0) } ?? -1
    }

    func suspend(_ app: TestApp, _ account: TestApp.Account, _ suspended: Bool) async throws {
        let id = try #require(UUID(uuidString: account.id))
        try await app.db.query(suspended ? "UPDATE users SET suspended_at = now() WHERE id = \(id)"
                                         : "UPDATE users SET suspended_at = NULL WHERE id = \(id)")
    }

    /// `count` meetup pins of `owner` in one statement, as an import writes them; `latitude` and
    /// `longitude` are SQL over `i`, the pin's number from 1.
    func insertPins(_ app: TestApp, owner: UUID, count: Int, latitude: String, longitude: String) async throws {
        try await app.db.query(PostgresQuery(unsafeSQL: """
            INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude)
            SELECT '\(owner.uuidString)', 'p', 'meetup', 0, 0, \(latitude), \(longitude)
            FROM generate_series(1, \(count)) AS i
            """))
    }

    @Test func pinSpotsFollowEveryWriteMoveDeleteSuspensionAndErasure() async throws {
        try await withApp { app in
            let ana = try await app.register(), ben = try await app.register(), cleo = try await app.register()
            let viewer = try await app.register()
            let many = try #require(UUID(uuidString: ben.id))
            // Many pins in one statement, several on one point.
            try await insertPins(app, owner: many, count: 400, latitude: "52.5 + (i % 7) * 0.01", longitude: "13.4 + (i % 5) * 0.01")
            let moved = try #require(try await app.addPin(ana.token, latitude: 52.52, longitude: 13.405)["id"] as? String)
            _ = try await app.addPin(ana.token, label: "Park", latitude: 52.6, longitude: 13.3, kind: "meetup")
            _ = try await app.addPin(cleo.token, latitude: 52.52, longitude: 13.405)
            #expect(try await drift(app) == 0)
            #expect(try await total(app, viewer.token) == 403)

            let patch = try await app.request(.patch, "/v1/me/pins/\(moved)", json: ["latitude": 52.45, "longitude": 13.6], token: ana.token)
            #expect(patch.status == .ok)
            #expect(try await app.request(.patch, "/v1/me/pins/\(moved)", json: ["label": "Flat"], token: ana.token).status == .ok)
            #expect(try await drift(app) == 0)

            try await suspend(app, ben, true)
            #expect(try await drift(app) == 0)
            #expect(try await total(app, viewer.token) == 3)
            try await suspend(app, ben, false)
            #expect(try await total(app, viewer.token) == 403)

            #expect(try await app.request(.delete, "/v1/me/pins/\(moved)", token: ana.token).status == .noContent)
            #expect(try await drift(app) == 0)
            // Erasing an active owner and a suspended one: the cascade takes each one's pins off once.
            #expect(try await app.request(.delete, "/v1/me", json: ["password": cleo.password], token: cleo.token).status == .accepted)
            try await suspend(app, ben, true)
            try await app.db.query("DELETE FROM users WHERE id = \(many)")
            #expect(try await drift(app) == 0)
            #expect(try await total(app, viewer.token) == 1)
        }
    }

    /// A pin written while its owner is being suspended: whichever commits first, the count
    /// ends as a recount would have it. The pin's trigger locks the owner, so the suspension waits.
    @Test func aPinWrittenDuringTheOwnersSuspensionIsNeverCountedForTheSuspended() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let id = try #require(UUID(uuidString: owner.id))
            let log = Logger(label: "t")
            try await app.db.withConnection { writer in
                try await writer.query("BEGIN", logger: log)
                try await writer.query("""
                    INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude)
                    VALUES (\(id), 'p', 'meetup', 52.5, 13.4, 52.5, 13.4)
                    """, logger: log)
                async let suspension: Void = suspend(app, owner, true)
                #expect(try await eventually { try await app.waiting(on: "UPDATE users SET suspended_at") })
                try await writer.query("COMMIT", logger: log)
                try await suspension
            }
            #expect(try await drift(app) == 0)
            #expect(try await app.count("SELECT coalesce(sum(pins), 0)::int8 FROM pin_spots", user: "") == 0)
        }
    }

    /// A pin moved from one spot to another locks both spots in spot order before it shifts
    /// them, so two moves in opposite directions meet at their lower spot and cannot deadlock.
    /// While another transaction holds the lower spot, a move between the two waits there
    /// holding nothing, whichever way it goes: the higher spot stays free. (Before migration
    /// 0025 a move took its loss before its gain, so the move down held the higher spot.)
    @Test func aPinMovedBetweenSpotsLocksThemInSpotOrder() async throws {
        try await withApp { app in
            let owner = try #require(UUID(uuidString: try await app.register().id))
            try await insertPins(app, owner: owner, count: 1, latitude: "52.505", longitude: "13.405")
            // Someone else's pin keeps the higher spot's row in being (a new row is no lock to test).
            let neighbour = try #require(UUID(uuidString: try await app.register().id))
            try await insertPins(app, owner: neighbour, count: 1, latitude: "52.525", longitude: "13.405")
            var spots: [Double: Int64] = [:]
            for latitude in [52.505, 52.525] {
                for try await spot in try await app.db.query("SELECT bookworm_map_spot(\(latitude), 13.405)").decode(Int64.self) {
                    spots[latitude] = spot
                }
            }
            let lowSpot = try #require(spots.values.min()), highSpot = try #require(spots.values.max())
            #expect(lowSpot != highSpot)
            let log = Logger(label: "t")
            for (from, to) in [(52.505, 52.525), (52.525, 52.505)] {
                try await app.db.withConnection { holder in
                    try await holder.query("BEGIN", logger: log)
                    try await holder.query("SELECT 1 FROM pin_spots WHERE spot = \(lowSpot) FOR UPDATE", logger: log)
                    @Sendable func move() async throws {
                        try await app.db.query("UPDATE pins SET public_latitude = \(to) WHERE owner_id = \(owner) AND public_latitude = \(from)")
                    }
                    async let moved: Void = move()
                    #expect(try await eventually { try await app.waiting(on: "UPDATE pins SET public_latitude") })
                    try await app.db.withConnection { probe in
                        try await probe.query("BEGIN", logger: log)
                        await #expect(throws: Never.self, "moving \(from) → \(to), the move holds the higher spot") {
                            // The refusal comes with the rows, so they are read.
                            for try await _ in try await probe.query("SELECT 1 FROM pin_spots WHERE spot = \(highSpot) FOR UPDATE NOWAIT",
                                                                     logger: log) {}
                        }
                        try await probe.query("ROLLBACK", logger: log)
                    }
                    try await holder.query("COMMIT", logger: log)
                    try await moved
                }
                #expect(try await drift(app) == 0)
            }
        }
    }

    /// A cluster sits at the mean public point of its pins, however the spots were summed.
    @Test func aClusterSitsAtItsPinsMeanPublicPoint() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let id = try #require(UUID(uuidString: owner.id))
            try await insertPins(app, owner: id, count: 400, latitude: "CASE WHEN i <= 250 THEN 52.501 ELSE 52.504 END",
                                 longitude: "CASE WHEN i <= 250 THEN 13.402 ELSE 13.406 END")
            // Taking pins away must move the mean back as well as adding them moved it.
            try await app.db.query("DELETE FROM pins WHERE ctid IN (SELECT ctid FROM pins WHERE public_longitude = 13.406 LIMIT 50)")
            let markers = try await app.request(.get, "/v1/map/pins?bbox=13,52,14,53&zoom=8", token: owner.token).jsonObject()["data"] as? [[String: Any]]
            let cluster = try #require(markers?.first)
            #expect(markers?.count == 1)
            #expect(cluster["count"] as? Int == 350)
            #expect(abs((cluster["latitude"] as? Double ?? 0) - (250 * 52.501 + 100 * 52.504) / 350) < 1e-9)
            #expect(abs((cluster["longitude"] as? Double ?? 0) - (250 * 13.402 + 100 * 13.406) / 350) < 1e-9)
        }
    }

    /// A spot whose pins lie mostly just outside the box still reaches into it: the pins inside
    /// are counted (with their spot's others), never left off the map.
    @Test func aSpotReachingIntoTheBoxIsNeverLeftOut() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let id = try #require(UUID(uuidString: owner.id))
            try await insertPins(app, owner: id, count: 2320, latitude: "52.505", longitude: "CASE WHEN i <= 320 THEN 13.409 ELSE 13.401 END")
            let markers = try await app.request(.get, "/v1/map/pins?bbox=13.405,52.45,13.5,52.55&zoom=12", token: owner.token)
                .jsonObject()["data"] as? [[String: Any]]
            #expect((markers?.reduce(0) { $0 + ($1["count"] as? Int ?? 0) } ?? 0) >= 320)
        }
    }

    /// Blocking works on counts too: the blocked person's pins come off the viewer's clusters,
    /// each person once even when both blocked each other.
    @Test func mutualBlocksTakeThePinsOffOnce() async throws {
        try await withApp { app in
            let ana = try await app.register(), ben = try await app.register()
            let many = try #require(UUID(uuidString: ben.id))
            try await insertPins(app, owner: many, count: 350, latitude: "52.5 + (i % 20) * 0.01", longitude: "13.4")
            _ = try await app.addPin(ana.token, latitude: 52.52, longitude: 13.405)
            #expect(try await total(app, ana.token) == 351)
            #expect(try await app.request(.put, "/v1/users/\(ben.username)/block", token: ana.token).status == .noContent)
            #expect(try await app.request(.put, "/v1/users/\(ana.username)/block", token: ben.token).status == .noContent)
            #expect(try await total(app, ana.token) == 1)
            #expect(try await total(app, ben.token) == 350)
        }
    }
}
