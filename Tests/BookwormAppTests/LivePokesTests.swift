import Foundation
import Logging
import PostgresNIO
import Synchronization
import Testing
@testable import BookwormApp
@testable import BookwormCore
@testable import BookwormTestSupport
@testable import Portability

/// When a poke may go out without reading the sync horizon: the writer's hint (`h <xid>`,
/// migration 0040) and what `LivePokes` makes of it.
@Suite struct LivePokesTests {
    static let epoch = "0123456789abcdef"
    static let logger = Logger(label: "test-live-pokes")

    @Test func aHintPokesEveryChangeBelowItWithoutARead() throws {
        let (first, second, later) = (UUID(), UUID(), UUID())
        var pokes = LivePokes()
        pokes.changed(first, in: 100)
        pokes.hinted(100)
        // No read yet: a token needs the epoch.
        #expect(pokes.known == nil)
        pokes.read(SyncToken(epoch: Self.epoch, xid: 101, id: 0))
        pokes.changed(second, in: 97)
        pokes.changed(later, in: 104)
        let known = try #require(pokes.known)
        #expect(known == SyncToken(epoch: Self.epoch, xid: 101, id: 0))
        #expect(Set(pokes.due(at: known)) == [first, second])
        #expect(pokes.pending == [later: 104])
        pokes.hinted(104)
        #expect(pokes.known.map { pokes.due(at: $0) } == [later])
        #expect(pokes.isEmpty)
    }

    @Test func aReadAboveTheHintsMovesTheKnownPositionAndOneBelowDoesNot() {
        var pokes = LivePokes()
        pokes.read(SyncToken(epoch: Self.epoch, xid: 200, id: 0))
        pokes.hinted(150)
        #expect(pokes.known?.xid == 200)
        pokes.read(SyncToken(epoch: Self.epoch, xid: 180, id: 0))
        #expect(pokes.known?.xid == 200)
        pokes.hinted(250)
        #expect(pokes.known?.xid == 251)
    }

    @Test func hintsHeardBeforeAFirstReadOrOneOfAnotherEpochCountForNothing() {
        var pokes = LivePokes()
        pokes.read(SyncToken(epoch: Self.epoch, xid: 200, id: 0))
        pokes.changed(UUID(), in: 150)
        pokes.forget()
        #expect(pokes.isEmpty && pokes.known == nil)
        // A former database's hint, heard after the listener reconnected.
        pokes.hinted(900)
        #expect(pokes.known == nil)
        pokes.read(SyncToken(epoch: Self.epoch, xid: 300, id: 0))
        #expect(pokes.known?.xid == 300)
        pokes.hinted(950)
        pokes.read(SyncToken(epoch: "fedcba9876543210", xid: 40, id: 0))
        #expect(pokes.known == SyncToken(epoch: "fedcba9876543210", xid: 40, id: 0))
    }

    @Test func aListenerThatReconnectsDropsTheHintsQueuedFromItsFormerConnection() async {
        let inbox = LiveInbox()
        inbox.add(LiveNotice.channel, "h 41")
        inbox.add(LiveNotice.channel, "s 00000000-0000-0000-0000-000000000001 41")
        inbox.listening(true)
        let batch = await inbox.next(retryAfter: nil)
        #expect(batch.resync)
        #expect(batch.notifications.map(\.1) == ["s 00000000-0000-0000-0000-000000000001 41"])
    }

    /// Whether the writer's transaction hinted, once its `s` notification has come.
    static func hinted(_ db: PostgresClient, user: UUID, pin: UUID) async throws -> Bool {
        let logger = Self.logger
        return try await db.withConnection { listener in
            let notifications = try await listener.listen("events")
            let heard = Mutex<[String]>([])
            let hearing = Task { for try await notification in notifications { heard.withLock { $0.append(notification.payload) } } }
            defer { hearing.cancel() }
            let xid = try await db.withConnection { writer in
                try await writer.query("BEGIN", logger: logger)
                let rows = try await writer.query("SELECT pg_current_xact_id()::text, bookworm_sync_log(\(user), 'pin', \(pin), 'upsert')::text",
                                                  logger: logger)
                var xid = ""
                for try await (id, _) in rows.decode((String, String).self) { xid = id }
                try await writer.query("COMMIT", logger: logger)
                return xid
            }
            let came = try await eventually { heard.withLock { $0.contains("s \(user.apiString) \(xid)") } }
            try #require(came, "transaction \(xid)'s notification did not come within 30 s")
            return heard.withLock { $0.contains("h \(xid)") }
        }
    }

    /// How many times the database has been asked for the sync horizon (`SyncStore.position`).
    static func horizonReads(_ db: PostgresClient) async throws -> Int {
        let rows = try await db.query("""
            SELECT coalesce(sum(calls), 0)::int8 FROM pg_stat_statements
            WHERE query LIKE 'SELECT bookworm_sync_epoch(), bookworm_sync_horizon()%'
            """, logger: logger)
        var calls = 0
        for try await count in rows.decode(Int.self) { calls = count }
        return calls
    }

    /// The oldest running transaction is the cluster's, and the shared test cluster always has
    /// another test's: this runs on a cluster of its own (no autovacuum, one server without a
    /// worker), where only the test's own transactions run.
    @Test func onAQuietClusterAHintedWriteIsPokedWithoutAReadAndThePullHasIt() async throws {
        let primary = try await PrivatePrimary.start(serverOptions: "-c shared_preload_libraries=pg_stat_statements -c autovacuum=off")
        do {
            let server = try await ServerProcess(databaseURL: primary.settings.connectionURL)
            defer { server.stop() }
            try await primary.settings.makeClient(poolSize: 4, logger: Self.logger).whileRunning { db in
                try await Self.hintedPoke(db, port: server.port)
            }
            try await primary.remove()
        } catch {
            try await primary.remove()
            throw error
        }
    }

    static func hintedPoke(_ db: PostgresClient, port: Int) async throws {
        try await db.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements", logger: logger)
        #expect(try await hinted(db, user: UUID(), pin: UUID()))
        try await db.withConnection { older in
            // A transaction with an id, begun before the write and still open after it.
            try await older.query("BEGIN", logger: logger)
            try await older.query("SELECT pg_current_xact_id()", logger: logger)
            #expect(try await !hinted(db, user: UUID(), pin: UUID()))
            try await older.query("COMMIT", logger: logger)
        }
        let person = try await LiveEventsTests.register(port, "hinted", db: db)
        try LiveEventsTests.pin(port, person, latitude: 52.52, longitude: 13.405)
        let pins = try LiveEventsTests.write(port, "GET", "/v1/me/pins", nil, person, expect: 200)["data"] as? [[String: Any]]
        let pin = try #require(UUID(uuidString: pins?.first?["id"] as? String ?? ""))
        let mine = try await LiveEventsTests.stream(port, "/v1/me/events", person)
        _ = try #require(await offThePool { mine.next("sync") })
        // The first poke reads (for the epoch); one whose writer hinted does not. Written here,
        // not through the API, whose writes read the position for their answer.
        var poked: (event: ReceivedEvent, since: String)?
        for round in 0..<3 where poked == nil {
            let since = try #require(LiveEventsTests.write(port, "GET", "/v1/sync", nil, person, expect: 200)["next"] as? String)
            let before = try await horizonReads(db)
            try await db.query("UPDATE pins SET label = \("round \(round)") WHERE id = \(pin)", logger: logger)
            let event = try #require(await offThePool { mine.next("sync") })
            if try await horizonReads(db) == before { poked = (event, since) }
        }
        let (poke, since) = try #require(poked, "every poke read the horizon")
        let pulled = try LiveEventsTests.write(port, "GET", "/v1/sync?since=\(since)", nil, person, expect: 200)
        #expect((pulled["changes"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [pin.apiString])
        // The poke's position is at most the horizon, and a stream resumed from it is not poked again.
        let token = try SyncToken(encoded: try #require(poke.id))
        let horizon = try await db.query("SELECT bookworm_sync_horizon()::text", logger: logger)
        for try await text in horizon.decode(String.self) { #expect(token.xid <= UInt64(text) ?? 0) }
        let again = try await LiveEventsTests.stream(port, "/v1/me/events", person, lastEventID: poke.id)
        let position = try #require(await offThePool { again.next(timeout: 20, skipping: "resync") })
        #expect(position.event == nil && position.id != nil)
    }
}
