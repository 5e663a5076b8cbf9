import Foundation
import Logging
import PostgresNIO
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
        pokes.read(SyncToken(epoch: Self.epoch, xid: 90, id: 0))
        #expect(pokes.known == SyncToken(epoch: Self.epoch, xid: 101, id: 0))
        pokes.changed(second, in: 97)
        pokes.changed(later, in: 104)
        let known = try #require(pokes.known)
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

    @Test func afterForgettingAPokeWaitsForARead() {
        var pokes = LivePokes()
        pokes.read(SyncToken(epoch: Self.epoch, xid: 200, id: 0))
        pokes.changed(UUID(), in: 150)
        pokes.forget()
        #expect(pokes.isEmpty && pokes.known == nil)
        pokes.hinted(300)
        #expect(pokes.known == nil)
    }

    /// Whether the writer's transaction hinted: the `h` and `s` notifications it sent, read until its `s`.
    static func hinted(_ db: PostgresClient, user: UUID) async throws -> Bool {
        let logger = Self.logger
        return try await db.withConnection { listener in
            let notifications = try await listener.listen("events")
            let xid = try await db.withConnection { writer in
                try await writer.query("BEGIN", logger: logger)
                let rows = try await writer.query("SELECT pg_current_xact_id()::text, bookworm_sync_log(\(user), 'pin', \(UUID()), 'upsert')::text",
                                                  logger: logger)
                var xid = ""
                for try await (id, _) in rows.decode((String, String).self) { xid = id }
                try await writer.query("COMMIT", logger: logger)
                return xid
            }
            var heard: [String] = []
            for try await notification in notifications {
                heard.append(notification.payload)
                if notification.payload == "s \(user.apiString) \(xid)" { break }
            }
            // The hint comes first, so the dispatcher has it when the user's change arrives.
            return heard.dropLast().contains("h \(xid)")
        }
    }

    @Test func aWriteBehindAnOlderTransactionDoesNotHint() async throws {
        try await withTestDatabase { _, db in
            try await db.withConnection { older in
                try await older.query("BEGIN", logger: Self.logger)
                try await older.query("SELECT pg_current_xact_id()", logger: Self.logger)
                for _ in 0..<3 { #expect(try await !Self.hinted(db, user: UUID())) }
                try await older.query("COMMIT", logger: Self.logger)
            }
        }
    }

    /// How many times this database has been asked for the sync horizon by the dispatcher's read.
    static func horizonReads(_ db: PostgresClient) async throws -> Int {
        let rows = try await db.query("""
            SELECT coalesce(sum(calls), 0)::int8 FROM pg_stat_statements
            WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
              AND query LIKE 'SELECT bookworm_sync_epoch(), bookworm_sync_horizon()%'
            """, logger: logger)
        var calls = 0
        for try await count in rows.decode(Int.self) { calls = count }
        return calls
    }

    /// The oldest running transaction is the cluster's, and the shared test cluster always has
    /// another test's: these run on a cluster of their own, with one server and nothing else.
    @Test func onAQuietClusterAWriteHintsAndItsPokeReadsNoHorizon() async throws {
        let folder = TestDatabaseServer.dataDirectory + "/hint-" + String(UUID().uuidString.prefix(8))
        let cluster = EmbeddedPostgres(dataDirectory: folder, logger: Self.logger, fastAndLoose: true,
                                       serverOptions: "-c shared_preload_libraries=pg_stat_statements")
        let settings = try await cluster.start(database: "bookworm")
        defer {
            cluster.stop()
            try? FileManager.default.removeItem(atPath: folder)
        }
        let server = try await ServerProcess(databaseURL: settings.connectionURL)
        defer { server.stop() }
        try await settings.makeClient(poolSize: 4, logger: Self.logger).whileRunning { db in
            try await db.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements", logger: Self.logger)
            #expect(try await Self.hinted(db, user: UUID()))
            let person = try await LiveEventsTests.register(server.port, "hinted", db: db)
            let mine = try await LiveEventsTests.stream(server.port, "/v1/me/events", person)
            let user = try #require(UUID(uuidString: person.id))
            _ = try #require(await offThePool { mine.next("sync") })
            // The first poke reads (for the epoch); one whose writer hinted does not. (Written
            // here, not through the API, whose writes read the position for their answer.)
            for round in 0..<2 {
                let before = try await Self.horizonReads(db)
                try await db.query("SELECT bookworm_sync_log(\(user), 'pin', \(UUID()), 'upsert')", logger: Self.logger)
                _ = try #require(await offThePool { mine.next("sync") })
                let reads = try await Self.horizonReads(db) - before
                #expect(round == 0 ? reads <= 1 : reads == 0, "round \(round): \(reads) horizon reads")
            }
        }
    }
}
