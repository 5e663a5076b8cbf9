import Foundation
import Logging
import PostgresNIO
import Testing
@testable import Accounts
@testable import BookwormCore
@testable import BookwormTestSupport

/// `SessionCache` against a real PostgreSQL: what another process changes (a `SessionStore`
/// without the cache, or SQL by hand, as the moderation CLI would) reaches the kept sessions
/// through the triggers' notifications.
@Suite struct SessionCacheTests {
    private static let logger = Logger(label: "session-cache-test")

    /// A kept session carries the user's columns (`AccountsStore.userColumns`): every one that
    /// can change must be watched by the trigger that tells the processes to drop it, or a kept
    /// session would go on showing the old value. Read from the schema, not from the migration.
    @Test func everyUserColumnASessionCarriesIsWatchedByTheSessionTrigger() async throws {
        try await withApp { app in
            let rows = try await app.db.query("""
                SELECT a.attname::text FROM pg_trigger t
                JOIN pg_attribute a ON a.attrelid = t.tgrelid AND a.attnum = ANY (t.tgattr::int2[])
                WHERE t.tgname = 'users_session_fields_notify'
                """)
            var watched: Set<String> = []
            for try await name in rows.decode(String.self) { watched.insert(name) }
            let carried = AccountsStore.userColumns.split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "u.", with: "")
            }
            let unchanging: Set<String> = ["id", "created_at"]
            #expect(carried.count >= 10)
            #expect(Set(carried).subtracting(unchanging).subtracting(watched).isEmpty, "not watched: \(Set(carried).subtracting(unchanging).subtracting(watched))")
        }
    }

    @Test func aSessionRevokedOrAUserChangedElsewhereIsDroppedAndReadAgain() async throws {
        try await withApp { app in
            let account = try await app.register()
            try await withListener(app) { cache, store in
                let hash = SessionStore.tokenHash(account.token)
                let first = try #require(try await store.authenticate(token: account.token))
                #expect(cache.session(hash, now: app.clock.now()) != nil)

                try await app.db.query("UPDATE users SET display_name = 'Renamed' WHERE id = \(first.user.id)")
                #expect(try await eventually { cache.session(hash, now: app.clock.now()) == nil })
                #expect(try await store.authenticate(token: account.token)?.user.displayName == "Renamed")

                let elsewhere = SessionStore(client: app.db, policy: SessionPolicy(), logger: Self.logger, clock: app.clock)
                try await elsewhere.revokeAll(userID: first.user.id)
                #expect(try await eventually { cache.session(hash, now: app.clock.now()) == nil })
                #expect(try await store.authenticate(token: account.token) == nil)
            }
        }
    }

    /// An event stream's check once it is registered (`SessionStore.isLive`) takes the cache's
    /// word while the cache holds the session, and the database's once a revocation dropped it.
    @Test func aHeldSessionIsLiveUntilItsRevocationIsHeard() async throws {
        try await withApp { app in
            let account = try await app.register()
            try await withListener(app) { cache, store in
                let session = try #require(try await store.authenticate(token: account.token))
                let (user, id, now) = (session.user.id, session.sessionID, app.clock.now())
                #expect(cache.holds(sessionID: id, of: user, now: now))
                #expect(!cache.holds(sessionID: UUID(), of: user, now: now))
                #expect(!cache.holds(sessionID: id, of: user, now: now.addingTimeInterval(SessionCache.lifetime)))
                #expect(try await store.isLive(id, of: user))
                // The cache's answer: a store whose pool never runs cannot reach the database.
                let offline = Database(client: app.settings.makeClient(logger: Self.logger),
                                       deadlines: DatabaseDeadlines(acquire: .milliseconds(200), statement: .milliseconds(200)))
                let cached = SessionStore(client: offline, policy: SessionPolicy(), logger: Self.logger, clock: app.clock, cache: cache)
                #expect(try await cached.isLive(id, of: user))

                let elsewhere = SessionStore(client: app.db, policy: SessionPolicy(), logger: Self.logger, clock: app.clock)
                try await elsewhere.revokeAll(userID: user)
                #expect(try await eventually { !cache.holds(sessionID: id, of: user, now: app.clock.now()) })
                #expect(try await store.isLive(id, of: user) == false)
            }
        }
    }

    @Test func anErasedUsersSessionsAreDropped() async throws {
        try await withApp { app in
            let account = try await app.register()
            try await withListener(app) { cache, store in
                let hash = SessionStore.tokenHash(account.token)
                let session = try #require(try await store.authenticate(token: account.token))
                try await app.db.query("DELETE FROM users WHERE id = \(session.user.id)")
                #expect(try await eventually { cache.session(hash, now: app.clock.now()) == nil })
                #expect(try await store.authenticate(token: account.token) == nil)
            }
        }
    }

    /// A logout in this process answers only after its own entry is gone, notification or not.
    @Test func aLogoutHereDropsTheSessionBeforeItAnswers() async throws {
        try await withApp { app in
            let account = try await app.register()
            try await withListener(app) { cache, store in
                let session = try #require(try await store.authenticate(token: account.token))
                try await store.revoke(sessionID: session.sessionID)
                #expect(cache.session(SessionStore.tokenHash(account.token), now: app.clock.now()) == nil)
                #expect(try await store.authenticate(token: account.token) == nil)
            }
        }
    }

    /// An entry is trusted for `SessionCache.lifetime` at most: then the session is read (and
    /// its idle expiry moved) again.
    @Test func anEntryIsKeptForItsLifetimeOnly() async throws {
        try await withApp { app in
            let account = try await app.register()
            try await withListener(app) { cache, store in
                let hash = SessionStore.tokenHash(account.token)
                _ = try #require(try await store.authenticate(token: account.token))
                app.clock.advance(by: SessionCache.lifetime - 1)
                #expect(cache.session(hash, now: app.clock.now()) != nil)
                app.clock.advance(by: 2)
                #expect(cache.session(hash, now: app.clock.now()) == nil)
            }
        }
    }

    /// Without its listener the cache keeps nothing; when the listener's connection ends, what
    /// it kept goes, and it keeps again once it listens anew.
    @Test func nothingIsKeptWhileTheListenerIsAway() async throws {
        try await withApp { app in
            let account = try await app.register()
            let hash = SessionStore.tokenHash(account.token)
            let unheard = SessionCache()
            let store = SessionStore(client: app.db, policy: SessionPolicy(), logger: Self.logger, clock: app.clock, cache: unheard)
            #expect(try await store.authenticate(token: account.token) != nil)
            #expect(unheard.session(hash, now: app.clock.now()) == nil)

            try await withListener(app) { cache, store in
                _ = try #require(try await store.authenticate(token: account.token))
                #expect(cache.session(hash, now: app.clock.now()) != nil)
                try await app.db.query("""
                    SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                    WHERE datname = current_database() AND query = 'LISTEN "sessions";'
                    """)
                #expect(try await eventually { cache.session(hash, now: app.clock.now()) == nil })
                #expect(try await eventually(within: 10) { cache.isListening })
                _ = try #require(try await store.authenticate(token: account.token))
                #expect(cache.session(hash, now: app.clock.now()) != nil)
            }
        }
    }

    /// Every connection of the database ended at once, as when PostgreSQL restarts, again and
    /// again: each time the cache lets go of what it kept and listens again, on a live connection.
    @Test func theListenerComesBackAfterEveryConnectionEnds() async throws {
        try await withApp { app in
            let account = try await app.register()
            let hash = SessionStore.tokenHash(account.token)
            try await withListener(app) { cache, store in
                for _ in 1...5 {
                    // Idle connections in the pool beside the listener's, to end with it.
                    try await withThrowingDiscardingTaskGroup { group in
                        for _ in 0..<4 { group.addTask { try await app.db.query("SELECT pg_sleep(0.01)") } }
                    }
                    _ = try #require(try await store.authenticate(token: account.token))
                    #expect(cache.session(hash, now: app.clock.now()) != nil)
                    try await app.db.query("""
                        SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                        WHERE datname = current_database() AND pid <> pg_backend_pid()
                        """)
                    // The cache lets go once it hears the connection end (watching for the
                    // moment it is not listening would miss it when this task waits past the
                    // listener's second of pause on a busy machine).
                    #expect(try await eventually(within: 30) { cache.session(hash, now: app.clock.now()) == nil })
                    #expect(try await eventually(within: 30) { cache.isListening })
                }
            }
        }
    }

    /// A notification about one user drops every session of theirs and nobody else's.
    @Test func aDropTakesEverySessionOfThatUserAndNoOneElses() async throws {
        try await withApp { app in
            let ann = try await app.register(), bob = try await app.register()
            try await withListener(app) { cache, store in
                let session = try #require(try await store.authenticate(token: ann.token))
                let annAgain = try await store.create(userID: session.user.id).token
                for token in [ann.token, annAgain, bob.token] { _ = try #require(try await store.authenticate(token: token)) }
                cache.drop(userID: session.user.id)
                let now = app.clock.now()
                #expect(cache.session(SessionStore.tokenHash(ann.token), now: now) == nil)
                #expect(cache.session(SessionStore.tokenHash(annAgain), now: now) == nil)
                #expect(cache.session(SessionStore.tokenHash(bob.token), now: now) != nil)
            }
        }
    }

    /// A lookup that began before a drop may have read the row before it changed: not kept.
    @Test func aLookupThatRacedADropIsNotKept() async throws {
        try await withApp { app in
            let account = try await app.register()
            try await withListener(app) { cache, store in
                let session = try #require(try await store.authenticate(token: account.token))
                let hash = SessionStore.tokenHash(account.token)
                cache.drop(userID: session.user.id)
                let before = cache.generation()
                cache.drop(userID: UUID())
                cache.keep(hash, session, readAt: before, now: app.clock.now(), expiresAt: .distantFuture)
                #expect(cache.session(hash, now: app.clock.now()) == nil)
            }
        }
    }

    /// Runs `body` with a cache whose listener is listening, and a store that uses it.
    private func withListener(_ app: TestApp, _ body: @Sendable (SessionCache, SessionStore) async throws -> Void) async throws {
        let cache = SessionCache()
        let store = SessionStore(client: app.db, policy: SessionPolicy(), logger: Self.logger, clock: app.clock, cache: cache)
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { try await SessionChanges(client: app.db, cache: cache, logger: Self.logger).run() }
            defer { group.cancelAll() }
            try #require(try await eventually { cache.isListening })
            try await body(cache, store)
        }
    }
}
