import FakePush
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// `Idempotency-Key` (API.md, "Safe retries"), in process; `IdempotencyCrashTests` kills a real server.
@Suite struct IdempotencyTests {
    static let copy = #"{"title":"The Left Hand of Darkness","authors":["Ursula K. Le Guin"],"condition":"good"}"#

    static func keyed(_ key: String) -> HTTPFields { [.idempotencyKey: key] }

    static func copies(of user: String, _ app: TestApp) async throws -> Int {
        try await app.count("SELECT count(*)::int8 FROM copies WHERE owner_id = $USER", user: user)
    }

    @Test func aPostSentThreeTimesWithOneKeyMakesOneCopyAndThreeEqualAnswers() async throws {
        try await withApp { app in
            let me = try await app.register()
            var answers: [TestResponse] = []
            for _ in 0..<3 {
                answers.append(try await app.request(.post, "/v1/me/copies", raw: Self.copy, token: me.token, headers: Self.keyed("copy-1")))
            }
            #expect(answers.map(\.status) == [.created, .created, .created])
            #expect(answers.map { $0.headers[.idempotentReplayed] } == [nil, "true", "true"])
            #expect(Set(answers.map { String(buffer: $0.body) }).count == 1)
            #expect(Set(answers.map { $0.headers[.eTag] }).count == 1)
            #expect(answers[2].headers[.contentType] == answers[0].headers[.contentType])
            #expect(try await Self.copies(of: me.id, app) == 1)
        }
    }

    @Test func fiftyIdenticalPostsAtOnceMakeOneCopy() async throws {
        try await withApp { app in
            let me = try await app.register()
            let answers = try await withThrowingTaskGroup(of: TestResponse.self) { group in
                for _ in 0..<50 {
                    group.addTask {
                        // A 409 (the first still running) is asked again, as a client would.
                        while true {
                            let answer = try await app.request(.post, "/v1/me/copies", raw: Self.copy, token: me.token,
                                                               headers: Self.keyed("burst"))
                            // 503: no connection within the deadline on a loaded machine; a client asks again.
                            if answer.status == .serviceUnavailable { continue }
                            if answer.status != .conflict { return answer }
                            #expect(try answer.jsonObject()["type"] as? String == "https://bookworm.example/problems/idempotency_in_progress")
                            #expect(answer.headers[.retryAfter] == "1")
                            await Task.yield()
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.allSatisfy { $0.status == .created })
            #expect(answers.filter { $0.headers[.idempotentReplayed] == nil }.count == 1)
            #expect(Set(answers.map { String(buffer: $0.body) }).count == 1)
            #expect(try await Self.copies(of: me.id, app) == 1)
        }
    }

    @Test func theSameKeyFromAnotherUserIsAnotherKey() async throws {
        try await withApp { app in
            let (me, other) = (try await app.register(), try await app.register())
            let mine = try await app.request(.post, "/v1/me/copies", raw: Self.copy, token: me.token, headers: Self.keyed("shared"))
            let theirs = try await app.request(.post, "/v1/me/copies", raw: Self.copy, token: other.token, headers: Self.keyed("shared"))
            #expect(mine.status == .created && theirs.status == .created)
            #expect(theirs.headers[.idempotentReplayed] == nil)
            #expect(try mine.jsonObject()["id"] as? String != theirs.jsonObject()["id"] as? String)
            #expect(try await Self.copies(of: other.id, app) == 1)
        }
    }

    @Test func aChangedBodyOrPathUnderAKeyIs422AndChangesNothing() async throws {
        try await withApp { app in
            let me = try await app.register()
            _ = try await app.request(.post, "/v1/me/copies", raw: Self.copy, token: me.token, headers: Self.keyed("k"))
            let changed = try await app.request(.post, "/v1/me/copies", raw: Self.copy.replacingOccurrences(of: "good", with: "fair"),
                                                token: me.token, headers: Self.keyed("k"))
            #expect(changed.status == .unprocessableContent)
            #expect(try changed.jsonObject()["type"] as? String == "https://bookworm.example/problems/idempotency_key_reused")
            #expect(try changed.problemFields() == ["Idempotency-Key"])
            let elsewhere = try await app.request(.post, "/v1/me/pins", raw: #"{"label":"Home","latitude":52.5,"longitude":13.4,"kind":"home"}"#,
                                                  token: me.token, headers: Self.keyed("k"))
            #expect(elsewhere.status == .unprocessableContent)
            #expect(try await Self.copies(of: me.id, app) == 1)
        }
    }

    @Test func afterItsLifetimeAKeyIsFreeAgain() async throws {
        try await withApp { app in
            let me = try await app.register()
            _ = try await app.request(.post, "/v1/me/copies", raw: Self.copy, token: me.token, headers: Self.keyed("day"))
            app.clock.advance(by: 23 * 3600)
            let within = try await app.request(.post, "/v1/me/copies", raw: Self.copy, token: me.token, headers: Self.keyed("day"))
            #expect(within.headers[.idempotentReplayed] == "true")
            app.clock.advance(by: 2 * 3600)
            let after = try await app.request(.post, "/v1/me/copies", raw: Self.copy, token: me.token, headers: Self.keyed("day"))
            #expect(after.status == .created && after.headers[.idempotentReplayed] == nil)
            #expect(try await Self.copies(of: me.id, app) == 2)
            let again = try await app.request(.post, "/v1/me/copies", raw: Self.copy, token: me.token, headers: Self.keyed("day"))
            #expect(again.headers[.idempotentReplayed] == "true")
            #expect(String(buffer: again.body) == String(buffer: after.body))
        }
    }

    @Test func aKeyThatIsNotOneToTwoHundredFiftyFiveVisibleCharactersIs400() async throws {
        try await withApp { app in
            let me = try await app.register()
            for bad in ["", String(repeating: "k", count: 256), "with space", "caf\u{e9}"] {
                let answer = try await app.request(.post, "/v1/me/copies", raw: Self.copy, token: me.token, headers: Self.keyed(bad))
                #expect(answer.status == .badRequest, "\(bad)")
                #expect(try answer.problemFields() == ["Idempotency-Key"])
            }
            let quoted = try await app.request(.post, "/v1/me/copies", raw: Self.copy, token: me.token, headers: Self.keyed("\"sf-string\""))
            #expect(quoted.status == .created)
            #expect(try await Self.copies(of: me.id, app) == 1)
        }
    }

    @Test func aRefusedWriteKeepsNothingAndTheKeyRunsAgainForReal() async throws {
        try await withApp { app in
            let me = try await app.register()
            let notMine = #"{"title":"Dune","authors":["Frank Herbert"],"condition":"good","pin_id":"\#(UUID().uuidString)"}"#
            let refused = try await app.request(.post, "/v1/me/copies", raw: notMine, token: me.token, headers: Self.keyed("retry"))
            #expect(refused.status.code >= 400 && refused.status.code < 500)
            let malformed = try await app.request(.post, "/v1/me/copies", raw: "{", token: me.token, headers: Self.keyed("retry"))
            #expect(malformed.status == .badRequest)
            let fixed = try await app.request(.post, "/v1/me/copies", raw: Self.copy, token: me.token, headers: Self.keyed("retry"))
            #expect(fixed.status == .created && fixed.headers[.idempotentReplayed] == nil)
        }
    }

    @Test func anAnswerCarryingASessionTokenIsNeverReplayed() async throws {
        try await withApp { app in
            let body = #"{"email":"keyed@example.org","username":"keyed_user","password":"correct horse battery"}"#
            let first = try await app.request(.post, "/v1/auth/register", raw: body, headers: Self.keyed("signup"))
            #expect(first.status == .created)
            #expect(first.headers[.cacheControl] == "no-store")
            let again = try await app.request(.post, "/v1/auth/register", raw: body, headers: Self.keyed("signup"))
            #expect(again.status == .conflict)
            #expect(try again.jsonObject()["type"] as? String == "https://bookworm.example/problems/idempotency_not_replayable")
            #expect(!String(buffer: again.body).contains(try first.jsonObject()["token"] as? String ?? "?"))
            #expect(try await app.count("SELECT count(*)::int8 FROM idempotency_keys WHERE body IS NULL AND scope LIKE 'address:%'", user: "") == 1)
            // So is a login's, whose session is written outside the request's transaction.
            let login = #"{"login":"keyed_user","password":"correct horse battery"}"#
            #expect(try await app.request(.post, "/v1/auth/login", raw: login, headers: Self.keyed("signin")).status == .ok)
            #expect(try await app.request(.post, "/v1/auth/login", raw: login, headers: Self.keyed("signin")).status == .conflict)
            // The key is the client address's: another address's is another key.
            let elsewhere = try await app.request(.post, "/v1/auth/register", raw: body, headers: Self.keyed("signup"), from: "203.0.113.9")
            #expect(elsewhere.status == .conflict)
            #expect(try elsewhere.jsonObject()["type"] as? String == "https://bookworm.example/problems/email-taken")
        }
    }

    @Test func aDeleteAndAPatchReplayTheirFirstAnswer() async throws {
        try await withApp { app in
            let me = try await app.register()
            let made = try await app.request(.post, "/v1/me/copies", raw: Self.copy, token: me.token)
            let id = try made.jsonObject()["id"] as? String ?? ""
            let patch = #"{"notes":"Signed"}"#
            let patched = try await app.request(.patch, "/v1/copies/\(id)", raw: patch, token: me.token, headers: Self.keyed("p"))
            let repatched = try await app.request(.patch, "/v1/copies/\(id)", raw: patch, token: me.token, headers: Self.keyed("p"))
            #expect(patched.status == .ok && repatched.headers[.idempotentReplayed] == "true")
            let deleted = try await app.request(.delete, "/v1/copies/\(id)", token: me.token, headers: Self.keyed("d"))
            let redeleted = try await app.request(.delete, "/v1/copies/\(id)", token: me.token, headers: Self.keyed("d"))
            #expect(deleted.status == .noContent && redeleted.status == .noContent)
            #expect(redeleted.headers[.idempotentReplayed] == "true")
            let unkeyed = try await app.request(.delete, "/v1/copies/\(id)", token: me.token)
            #expect(unkeyed.status == .notFound)
        }
    }

    @Test func aKeyedErasureErasesAndKeepsNothingThatNamesThePerson() async throws {
        try await withApp { app in
            let me = try await app.register()
            let erased = try await app.request(.delete, "/v1/me", raw: #"{"password":"\#(me.password)"}"#, token: me.token,
                                               headers: Self.keyed("goodbye"))
            #expect(erased.status == .accepted)
            #expect(try await app.count("""
                SELECT (SELECT count(*) FROM users WHERE id = $USER)
                     + (SELECT count(*) FROM idempotency_keys WHERE user_id = $USER OR scope = 'user:' || $USER)
                """, user: me.id) == 0)
        }
    }

    @Test func aSingleStatementDeleteReplaysItsAnswer() async throws {
        try await withApp { app in
            let me = try await app.registerTrader()
            _ = try await app.addPin(me.token)
            let book = try #require((try await app.addCopy(me.token, title: "Roadside Picnic")["book"] as? [String: Any])?["id"] as? String)
            let wish = try #require(try await app.wish(me.token, book: book).jsonObject()["id"] as? String)
            let first = try await app.request(.delete, "/v1/me/wishes/\(wish)", token: me.token, headers: Self.keyed("unwish"))
            let again = try await app.request(.delete, "/v1/me/wishes/\(wish)", token: me.token, headers: Self.keyed("unwish"))
            #expect(first.status == .noContent && again.status == .noContent && again.headers[.idempotentReplayed] == "true")
            #expect(try await app.request(.put, "/v1/me/readings/\(book)", raw: #"{"state":"reading"}"#, token: me.token).status == .created)
            let unread = try await app.request(.delete, "/v1/me/readings/\(book)", token: me.token, headers: Self.keyed("unread"))
            let reread = try await app.request(.delete, "/v1/me/readings/\(book)", token: me.token, headers: Self.keyed("unread"))
            #expect(unread.status == .noContent && reread.headers[.idempotentReplayed] == "true")
        }
    }

    @Test func aKeyedWriteStoppedByTheStatementDeadlineLeavesNothingAndFreesItsKey() async throws {
        // The deadlines bound every call of this app, not only the stuck one: under a loaded test
        // run a registration once took more than a second (acquire as the other tests have it).
        try await withApp(configure: { $0.databaseDeadlines = DatabaseDeadlines(acquire: .seconds(30), statement: .seconds(6)) }) { app in
            let me = try await app.register()
            let settings = app.settings
            let answer = try await settings.makeClient(poolSize: 1, logger: Logger(label: "locker")).whileRunning { locker in
                try await locker.withConnection { connection in
                    try await connection.query("BEGIN", logger: connection.logger)
                    try await connection.query("LOCK TABLE copies IN SHARE ROW EXCLUSIVE MODE", logger: connection.logger)
                    let answer = try await app.request(.post, "/v1/me/copies", raw: Self.copy, token: me.token, headers: Self.keyed("stuck"))
                    try await connection.query("ROLLBACK", logger: connection.logger)
                    return answer
                }
            }
            #expect(answer.status == .serviceUnavailable, "\(String(buffer: answer.body))")
            #expect(try await Self.copies(of: me.id, app) == 0)
            // Its transaction, and with it the key's lock, is gone: the retry runs for real.
            let retry = try await app.request(.post, "/v1/me/copies", raw: Self.copy, token: me.token, headers: Self.keyed("stuck"))
            #expect(retry.status == .created && retry.headers[.idempotentReplayed] == nil)
            #expect(try await Self.copies(of: me.id, app) == 1)
        }
    }

    @Test func aKeyedImportUploadIsStoredOnceAndItsRetryReplayed() async throws {
        try await withApp { app in
            let me = try await app.register()
            let file = ([TestApp.goodreadsHeader.joined(separator: ",")]
                + (0..<50).map { TestApp.goodreadsRow(["Title": "Book \($0)", "Author": "Someone", "Exclusive Shelf": "to-read"]) })
                .joined(separator: "\n")
            var headers = Self.keyed("import-1")
            headers[.contentType] = "text/csv"
            let first = try await app.request(.post, "/v1/me/imports", raw: file, token: me.token, headers: headers)
            let again = try await app.request(.post, "/v1/me/imports", raw: file, token: me.token, headers: headers)
            #expect(first.status == .accepted && again.status == .accepted && again.headers[.idempotentReplayed] == "true")
            #expect(String(buffer: first.body) == String(buffer: again.body))
            #expect(try await app.count("SELECT count(*)::int8 FROM imports WHERE user_id = $USER", user: me.id) == 1)
        }
    }

    /// `PATCH /v1/me` and a device's removal are one statement each, in a transaction of their
    /// own; an unblock is one outside any, whose answer is kept right after it. Each retry replays.
    @Test func aWriteOfOneStatementReplaysItsAnswerAndChangesNothing() async throws {
        try await withApp { app in
            let me = try await app.register()
            let first = try await app.request(.patch, "/v1/me", raw: #"{"bio":"first"}"#, token: me.token, headers: Self.keyed("bio"))
            #expect(try await app.request(.patch, "/v1/me", raw: #"{"bio":"since"}"#, token: me.token).status == .ok)
            let retry = try await app.request(.patch, "/v1/me", raw: #"{"bio":"first"}"#, token: me.token, headers: Self.keyed("bio"))
            #expect(first.status == .ok && retry.status == .ok && retry.headers[.idempotentReplayed] == "true")
            #expect(String(buffer: retry.body) == String(buffer: first.body))
            #expect(try await app.request(.get, "/v1/me", token: me.token).jsonObject()["bio"] as? String == "since")
            let device = try await app.registerDevice(me.token, token: FakePushProvider.apnsToken())
            let id = try #require(try device.jsonObject()["id"] as? String)
            let removed = try await app.request(.delete, "/v1/me/devices/\(id)", token: me.token, headers: Self.keyed("device"))
            let again = try await app.request(.delete, "/v1/me/devices/\(id)", token: me.token, headers: Self.keyed("device"))
            #expect(removed.status == .noContent && again.status == .noContent && again.headers[.idempotentReplayed] == "true")
            let other = try await app.register()
            #expect(try await app.request(.put, "/v1/users/\(other.username)/block", token: me.token).status == .noContent)
            let unblocked = try await app.request(.delete, "/v1/users/\(other.username)/block", token: me.token, headers: Self.keyed("unblock"))
            let reunblocked = try await app.request(.delete, "/v1/users/\(other.username)/block", token: me.token, headers: Self.keyed("unblock"))
            #expect(unblocked.status == .noContent && reunblocked.headers[.idempotentReplayed] == "true")
        }
    }

    /// A password change's body holds two passwords: no fast hash of it is kept, and its retry
    /// is told to look instead of being answered 204 from a kept answer.
    @Test func aPasswordChangeUnderAKeyKeepsNoHashAndIsNotReplayed() async throws {
        try await withApp { app in
            let me = try await app.register()
            let body = #"{"current_password":"\#(me.password)","new_password":"a brand new passphrase"}"#
            let changed = try await app.request(.post, "/v1/me/password", raw: body, token: me.token, headers: Self.keyed("pw"))
            #expect(changed.status == .noContent && changed.headers[.cacheControl] == "no-store")
            let again = try await app.request(.post, "/v1/me/password", raw: body, token: me.token, headers: Self.keyed("pw"))
            #expect(again.status == .conflict)
            #expect(try again.jsonObject()["type"] as? String == "https://bookworm.example/problems/idempotency_not_replayable")
            #expect(try await app.count("""
                SELECT count(*)::int8 FROM idempotency_keys WHERE scope = 'user:' || $USER AND body IS NULL AND length(request_hash) = 0
                """, user: me.id) == 1)
        }
    }

    @Test func housekeepingPurgesKeysPastTheirLifetime() async throws {
        try await withApp { app in
            let me = try await app.register()
            _ = try await app.request(.post, "/v1/me/copies", raw: Self.copy, token: me.token, headers: Self.keyed("old"))
            let store = IdempotencyStore(client: app.db, clock: app.clock, hours: 24, logger: Logger(label: "test"))
            #expect(try await store.purge() == 0)
            app.clock.advance(by: 24 * 3600 + 1)
            #expect(try await store.purge() == 1)
        }
    }
}
