import Foundation
import HummingbirdTesting
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Portability
@testable import BookwormTestSupport

/// `GET /v1/sync`: every change of my objects since a token, oldest first, tombstones included.
@Suite struct SyncTests {
    @Test func aFirstSyncHasEveryKindOfMyObjectsAsTheirGetShowsThem() async throws {
        try await withApp { app in
            let me = try await app.registerTrader()
            let other = try await app.registerTrader()
            let pin = try #require(try await app.addPin(me.token)["id"] as? String)
            let copy = try #require(try await app.addCopy(me.token, title: "Mine")["id"] as? String)
            let book = try #require((try await app.addCopy(other.token, title: "Theirs")["book"] as? [String: Any])?["id"] as? String)
            let theirCopy = try #require(try await app.page("/v1/copies?limit=10").ids.first { $0 != copy })
            #expect(try await app.request(.put, "/v1/me/readings/\(book)", json: ["state": "reading"], token: me.token).status == .created)
            let wish = try #require(try await app.wish(me.token, book: book).jsonObject()["id"] as? String)
            let post = try #require(try await app.addPost(me.token)["id"] as? String)
            let stranger = try await app.register()
            #expect(try await app.request(.put, "/v1/users/\(stranger.username)/block", token: me.token).status == .noContent)
            let trade = try await app.trade(me.token, copy: theirCopy)
            var blockID = ""
            for try await id in try await app.db.query("SELECT id FROM blocks").decode(UUID.self) { blockID = id.apiString }

            let (changes, _) = try await eventuallySynced(app, me.token, since: nil, count: 7)
            let seen = Set(changes.map { "\($0["type"] as? String ?? "")/\($0["id"] as? String ?? "")" })
            #expect(seen == ["pin/\(pin)", "copy/\(copy)", "reading/\(book)", "wish/\(wish)", "post/\(post)",
                             "block/\(blockID)", "trade/\(trade)"])
            #expect(changes.allSatisfy { $0["op"] as? String == "upsert" })
            // The same shape as the object's own GET.
            let mine = try await app.request(.get, "/v1/me/copies", token: me.token).jsonObject()["data"] as? [[String: Any]]
            let synced = changes.first { $0["type"] as? String == "copy" }?["data"] as? [String: Any]
            #expect(synced.map { NSDictionary(dictionary: $0) } == mine?.first.map { NSDictionary(dictionary: $0) })
            let pinData = changes.first { $0["type"] as? String == "pin" }?["data"] as? [String: Any]
            #expect(pinData?["latitude"] as? Double == 52.52)  // the exact point: it is my own data
            // The other side has the trade too, and nothing of mine.
            let theirs = try await eventuallySynced(app, other.token, since: nil, count: 2).changes.map { "\($0["type"] as? String ?? "")/\($0["id"] as? String ?? "")" }
            #expect(Set(theirs) == ["copy/\(theirCopy)", "trade/\(trade)"])
        }
    }

    @Test func aWriteAnswersWithTheSyncPositionAfterIt() async throws {
        try await withApp { app in
            let me = try await app.register()
            let first = try await app.request(.post, "/v1/me/copies", json: ["title": "First", "authors": ["A"], "condition": "good"], token: me.token)
            let token = try #require(first.headers[.syncToken])
            let second = try await app.request(.post, "/v1/me/copies", json: ["title": "Second", "authors": ["A"], "condition": "good"], token: me.token)
            let secondID = try second.jsonObject()["id"] as? String
            // The write after it is always in a sync from it (what came before may be too, while older transactions run).
            #expect(try await eventually(within: 30) {
                try await app.syncAll(me.token, since: token).changes.contains { $0["id"] as? String == secondID }
            })
            // Reads and refused writes carry none.
            #expect(try await app.request(.get, "/v1/me/copies", token: me.token).headers[.syncToken] == nil)
            #expect(try await app.request(.post, "/v1/me/copies", json: ["condition": "good"], token: me.token).headers[.syncToken] == nil)
        }
    }

    @Test func aDeltaHasOnlyWhatChangedSinceTheTokenAndDeletionsAsTombstones() async throws {
        try await withApp { app in
            let me = try await app.register()
            let kept = try #require(try await app.addCopy(me.token, title: "Kept")["id"] as? String)
            let gone = try #require(try await app.addCopy(me.token, title: "Gone")["id"] as? String)
            _ = try await app.addCopy(me.token, title: "Untouched")
            let first = try await eventuallySynced(app, me.token, since: nil, count: 3)
            #expect(first.changes.count == 3)
            #expect(try await app.syncPage(me.token, since: first.next).changes.isEmpty)

            #expect(try await app.request(.patch, "/v1/copies/\(kept)", json: ["condition": "fair"], token: me.token).status == .ok)
            #expect(try await app.request(.delete, "/v1/copies/\(gone)", token: me.token).status == .noContent)
            let delta = try await eventuallySynced(app, me.token, since: first.next, count: 2)
            #expect(delta.changes.map { $0["id"] as? String } == [kept, gone])
            #expect(delta.changes.map { $0["op"] as? String } == ["upsert", "delete"])
            #expect((delta.changes[0]["data"] as? [String: Any])?["condition"] as? String == "fair")
            #expect(delta.changes[1]["data"] == nil)
        }
    }

    @Test func aTransactionThatStartedFirstAndCommitsLastIsSeenExactlyOnce() async throws {
        try await withApp { app in
            let me = try await app.register()
            let start = try await app.syncAll(me.token).next
            let user = try #require(UUID(uuidString: me.id))
            let copy: String = try await app.db.withConnection { long in
                // The long transaction takes its id first...
                try await long.query("BEGIN", logger: Logger(label: "t"))
                try await long.query("""
                    INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude, is_default)
                    VALUES (\(user), 'Slow', 'meetup', 1, 2, 1, 2, true)
                    """, logger: Logger(label: "t"))
                // ...another one commits after it started...
                let copy = try #require(try await app.addCopy(me.token, title: "Quick")["id"] as? String)
                // ...and is held back while the long one runs, so the token cannot pass the long one.
                let early = try await app.syncPage(me.token, since: start)
                #expect(early.changes.isEmpty)
                try await long.query("COMMIT", logger: Logger(label: "t"))
                return copy
            }
            let after = try await eventuallySynced(app, me.token, since: start, count: 2)
            #expect(after.changes.map { $0["type"] as? String } == ["pin", "copy"])
            #expect(after.changes.last?["id"] as? String == copy)
            #expect(try await app.syncAll(me.token, since: after.next).changes.isEmpty)
        }
    }

    /// Another database's transaction can never write here, so it must not hold sync back (it
    /// did while the horizon was the whole cluster's `pg_snapshot_xmin`: this failed then).
    @Test func aTransactionInAnotherDatabaseDoesNotHoldSyncBack() async throws {
        try await withApp { app in
            let me = try await app.register()
            let start = try await app.syncAll(me.token).next
            let logger = Logger(label: "elsewhere")
            let elsewhere = try await TestDatabaseServer.shared.adminSettings().makeClient(poolSize: 1, logger: logger)
            try await elsewhere.whileRunning { other in
                try await other.withConnection { long in
                    try await long.query("BEGIN", logger: logger)
                    // Takes its id now: older than the copy's, and still running when sync reads.
                    for try await _ in try await long.query("SELECT pg_current_xact_id()", logger: logger) {}
                    let copy = try #require(try await app.addCopy(me.token, title: "Meanwhile")["id"] as? String)
                    let page = try await eventuallySynced(app, me.token, since: start, count: 1)
                    #expect(page.changes.map { $0["id"] as? String } == [copy])
                    try await long.query("ROLLBACK", logger: logger)
                }
            }
        }
    }

    @Test func pagesAreStableAndAFullSyncEqualsTheSumOfDeltas() async throws {
        try await withApp { app in
            let me = try await app.register()
            var ids: [String] = []
            for index in 0..<25 { ids.append(try #require(try await app.addCopy(me.token, title: "Book \(index)")["id"] as? String)) }
            _ = try await eventuallySynced(app, me.token, since: nil, count: 25)
            let first = try await app.syncPage(me.token, limit: 10)
            let second = try await app.syncPage(me.token, since: first.next, limit: 10)
            let again = try await app.syncPage(me.token, since: first.next, limit: 10)
            #expect(first.hasMore && second.hasMore)
            #expect(second.changes.map { $0["id"] as? String } == again.changes.map { $0["id"] as? String })
            var client = SyncReplica()
            try client.apply(first.changes)
            try client.apply(second.changes)
            let rest = try await app.syncAll(me.token, since: second.next, limit: 10)
            try client.apply(rest.changes)
            #expect(client.objects.count == 25)

            // Some changes, some deletions, a new pin; the client applies only the deltas.
            for id in ids.prefix(5) { _ = try await app.request(.delete, "/v1/copies/\(id)", token: me.token) }
            for id in ids.suffix(5) { _ = try await app.request(.patch, "/v1/copies/\(id)", json: ["notes": "signed"], token: me.token) }
            try await app.addPin(me.token)
            let delta = try await eventuallySynced(app, me.token, since: rest.next, count: 11, limit: 4)
            try client.apply(delta.changes)

            var fresh = SyncReplica()
            try fresh.apply(try await eventuallySynced(app, me.token, since: nil, count: 21, limit: 7).changes)
            #expect(client == fresh)
            #expect(fresh.objects.count == 21)
        }
    }

    @Test func aTokenOlderThanThePurgedTombstonesOrFromAnotherEpochIsGone() async throws {
        try await withApp { app in
            let me = try await app.register()
            let copy = try #require(try await app.addCopy(me.token)["id"] as? String)
            let before = try await app.syncAll(me.token).next
            _ = try await app.request(.delete, "/v1/copies/\(copy)", token: me.token)
            let recent = try await eventuallySynced(app, me.token, since: before, count: 1).next

            app.clock.advance(by: 31 * 86400)
            let login = try await app.request(.post, "/v1/auth/login", json: ["login": me.username, "password": me.password])
            let token = try #require(try login.jsonObject()["token"] as? String)
            // The app's housekeeping wakes on the advanced clock and may purge first; either way it is gone.
            try await SyncStore(client: app.db, logger: Logger(label: "t"))
                .purgeTombstones(before: app.clock.now().addingTimeInterval(-30 * 86400))
            let tombstones = try await app.db.query("SELECT count(*)::int8 FROM sync_changes WHERE op = 'delete'")
            for try await count in tombstones.decode(Int64.self) { #expect(count == 0) }
            let expired = try await app.request(.get, "/v1/sync?since=\(before)", token: token)
            #expect(expired.status == .gone)
            #expect(expired.isProblem)
            #expect(try expired.jsonObject()["type"] as? String == "https://bookworm.example/problems/sync_token_expired")
            #expect(try expired.problemFields() == ["since"])
            // A token that saw the deletion keeps working.
            #expect(try await app.request(.get, "/v1/sync?since=\(recent)", token: token).status == .ok)

            // A restore makes another data epoch: every older token is gone.
            try await app.db.query("UPDATE sync_state SET epoch = gen_random_uuid()")
            #expect(try await app.request(.get, "/v1/sync?since=\(recent)", token: token).status == .gone)
            #expect(try await app.request(.get, "/v1/sync", token: token).status == .ok)
        }
    }

    @Test func malformedTokensAndLimitsAreRefusedNamingTheField() async throws {
        try await withApp { app in
            let me = try await app.register()
            for (query, field) in [("since=", "since"), ("since=a%2Bb", "since"), ("since=\(String(repeating: "a", count: 121))", "since"),
                                   ("limit=0", "limit"), ("limit=1001", "limit"), ("limit=ten", "limit")] {
                let response = try await app.request(.get, "/v1/sync?\(query)", token: me.token)
                #expect(response.status == .badRequest, "\(query)")
                #expect(try response.problemFields() == [field], "\(query)")
            }
            // In the token alphabet but not a token of ours: 422, also naming the field.
            for query in ["since=abc", "since=MS4wMDAwLjEuMQ"] {
                let response = try await app.request(.get, "/v1/sync?\(query)", token: me.token)
                #expect(response.status == .unprocessableContent, "\(query)")
                #expect(try response.problemFields() == ["since"], "\(query)")
            }
            #expect(try await app.request(.get, "/v1/sync?limit=1000", token: me.token).status == .ok)
            #expect(try await app.request(.get, "/v1/sync").status == .unauthorized)
        }
    }

    @Test func aCopyGivenAwayLeavesTheGiversSyncAndJoinsTheTakers() async throws {
        try await withApp { app in
            let giver = try await app.registerTrader()
            let taker = try await app.registerTrader()
            let copy = try await app.copyID(giver.token)
            let giverStart = try await app.syncAll(giver.token).next
            let takerStart = try await app.syncAll(taker.token).next
            let trade = try await app.trade(taker.token, copy: copy)
            for (action, token) in [("accept", giver.token), ("confirm", giver.token), ("confirm", taker.token)] {
                #expect(try await app.act(action, trade, token).status == .ok)
            }
            let given = try await eventuallySynced(app, giver.token, since: giverStart, count: 2)
            #expect(Set(given.changes.map { "\($0["type"] as? String ?? "")/\($0["op"] as? String ?? "")" })
                    == ["copy/delete", "trade/upsert"])
            let taken = try await eventuallySynced(app, taker.token, since: takerStart, count: 2)
            #expect(Set(taken.changes.map { "\($0["type"] as? String ?? "")/\($0["op"] as? String ?? "")" })
                    == ["copy/upsert", "trade/upsert"])
        }
    }
}

/// Sync serves a change once every transaction older than it has ended; other tests' transactions
/// on the same server (another process's work, as far as this test knows) can hold that back for
/// a moment, so wait for `count` changes the way `eventually` waits for another process.
func eventuallySynced(_ app: TestApp, _ token: String, since: String?, count: Int, limit: Int? = nil) async throws
    -> (changes: [[String: Any]], next: String)
{
    let result = Box<(changes: [[String: Any]], next: String)>(([], ""))
    _ = try await eventually(within: 30) {
        result.value = try await app.syncAll(token, since: since, limit: limit)
        return result.value.changes.count >= count
    }
    return result.value
}

/// A value the `eventually` closure fills in.
final class Box<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}
