import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import BookwormApp
@testable import BookwormTestSupport

/// `DATABASE_READ_URL`: the search endpoints read a real streaming replica of the test cluster,
/// what a user just wrote stays on the primary, and a replica that goes away is not an outage.
@Suite(.serialized) struct ReplicaTests {
    @Test func searchesReadTheReplicaAndFallBackToThePrimaryWhenItStops() async throws {
        // Its own primary and replica: the clusters every other test shares are never copied or touched.
        let primary = try await PrivatePrimary.start()
        do {
            let replica = try await StreamingReplica.start(primaryDataDirectory: primary.base)
            do {
                try await Self.readAndFallBack(primary: primary, replica: replica)
                try await replica.remove()
            } catch {
                try await replica.remove()
                throw error
            }
            try await primary.remove()
        } catch {
            try await primary.remove()
            throw error
        }
    }

    static let nearbyFeed = "/v1/posts?latitude=52.52&longitude=13.405&radius_km=5"

    private static func readAndFallBack(primary: PrivatePrimary, replica: StreamingReplica) async throws {
        var config = Config.forTests(primary.settings)
        config.migrateOnStart = true
        config.databaseReadURL = replica.settings(database: primary.settings.database).connectionURL
        try await withApp(config: config, on: primary.settings) { app in
            let replicaClient = replica.settings(database: app.settings.database).makeClient(poolSize: 1, logger: Logger(label: "replica"))
            let token = try await replicaClient.whileRunning { replicaDB in
                // The replica is a replica, and it has this test's database (once replay reaches its creation).
                let inRecovery = try await eventually(within: 30) {
                    guard let rows = try? await replicaDB.query("SELECT pg_is_in_recovery()") else { return false }
                    for try await flag in rows.decode(Bool.self) { return flag }
                    return false
                }
                #expect(inRecovery)
                // And it has replayed the migrations the app just ran: until then a statement naming
                // what they added fails there (and is answered by the primary).
                var primaryLSN = ""
                for try await lsn in try await app.db.query("SELECT pg_current_wal_lsn()::text").decode(String.self) { primaryLSN = lsn }
                #expect(try await eventually(within: 30) {
                    guard let rows = try? await replicaDB.query("SELECT coalesce(pg_last_wal_replay_lsn() >= \(primaryLSN)::pg_lsn, false)") else { return false }
                    for try await caughtUp in rows.decode(Bool.self) { return caughtUp }
                    return false
                })
                let owner = try await app.register()
                _ = try await app.addCopy(owner.token, title: "Seen Everywhere")
                #expect(try await eventually(within: 30) { try await app.page("/v1/copies?limit=100").ids.count == 1 })

                // Replay paused: a new copy is on the primary (my copies) but not yet in the library.
                try await replicaDB.query("SELECT pg_wal_replay_pause()")
                let fresh = try #require(try await app.addCopy(owner.token, title: "Only On The Primary")["id"] as? String)
                let mine = try await app.request(.get, "/v1/me/copies?limit=100", token: owner.token).jsonObject()["data"] as? [[String: Any]]
                #expect(mine?.compactMap { $0["id"] as? String }.contains(fresh) == true)
                // Sync reads the primary: a phone's pull never misses what it just wrote.
                let synced = try await app.syncAll(owner.token).changes
                #expect(synced.contains { $0["type"] as? String == "copy" && $0["id"] as? String == fresh })
                // Served by the replica, which has not replayed it. Eventually: on a loaded machine a
                // replica read can miss its 500 ms acquire deadline, and then the primary serves the
                // library for `ReplicaFallback.rest` (10 s) before the replica is tried again. A full
                // `make test` once still read the primary after 20 s, so four rests are allowed.
                #expect(try await eventually(within: 45, interval: .milliseconds(200)) {
                    try await app.page("/v1/copies?limit=100").ids.contains(fresh) == false
                })
                try await replicaDB.query("SELECT pg_wal_replay_resume()")
                #expect(try await eventually(within: 30) { try await app.page("/v1/copies?limit=100").ids.contains(fresh) })

                // The nearby feed reads the replica too, in a read's own transaction.
                try await app.addPin(owner.token, kind: "meetup")
                _ = try await app.addPost(owner.token, body: "Swap near the station")
                #expect(try await eventually(within: 30) { try await app.feedIDs(Self.nearbyFeed, token: owner.token).count == 1 })
                return owner.token
            }

            // The replica stops: the library is served by the primary instead of failing (no bound
            // on how fast: a loaded machine takes its time; the point is an answer, not a 503).
            try await replica.stopServer()
            let page = try await app.request(.get, "/v1/copies?limit=100")
            #expect(page.status == .ok)
            #expect((try page.jsonObject()["data"] as? [Any])?.count == 2)
            let user = try await app.request(.get, "/v1/users/nobody_here/copies")
            #expect(user.status == .notFound)
            #expect(try await app.feedIDs(Self.nearbyFeed, token: token).count == 1)
        }
    }
}
