import Foundation
import Logging
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Mail
@testable import Accounts
@testable import BookwormTestSupport

@Suite struct AccountsTests {
    @Test func registerReturnsTokenAndPrivateUser() async throws {
        try await withApp { app in
            let response = try await app.request(.post, "/v1/auth/register", json: [
                "email": "  Ann.Reader@Example.ORG ", "username": "Ann_Reads", "password": "correct horse battery",
                "display_name": "Ann",
            ])
            #expect(response.status == .created)
            let body = try response.jsonObject()
            let user = try #require(body["user"] as? [String: Any])
            #expect(user["username"] as? String == "ann_reads")
            #expect(user["email"] as? String == "Ann.Reader@Example.ORG")
            #expect(user["email_verified"] as? Bool == false)
            #expect(user["password_hash"] == nil)
            #expect(Set(user.keys) == ["id", "email", "email_verified", "username", "display_name", "bio", "created_at", "alerts", "push"])
            let token = try #require(body["token"] as? String)
            #expect(token.count >= 43)
            #expect(body["expires_at"] is String)
        }
    }

    @Test func storedTokenIsOnlyItsHash() async throws {
        try await withApp { app in
            let account = try await app.register()
            let rows = try await app.db.query("SELECT token_hash FROM sessions")
            var hashes: [ByteBuffer] = []
            for try await hash in rows.decode(ByteBuffer.self) { hashes.append(hash) }
            #expect(hashes.count == 1)
            #expect(Array(hashes[0].readableBytesView) == Digest.sha256(account.token))
            #expect(hashes[0].readableBytes == 32)
        }
    }

    @Test func takenUsernameOrEmailIs409CaseInsensitively() async throws {
        try await withApp { app in
            _ = try await app.register(username: "bookish", email: "book@example.org")
            let sameName = try await app.request(.post, "/v1/auth/register", json: [
                "email": "other@example.org", "username": "BOOKISH", "password": "correct horse battery"])
            #expect(sameName.status == .conflict)
            #expect(try sameName.problemFields() == ["username"])
            let sameEmail = try await app.request(.post, "/v1/auth/register", json: [
                "email": "BOOK@example.org", "username": "other", "password": "correct horse battery"])
            #expect(sameEmail.status == .conflict)
            #expect(try sameEmail.problemFields() == ["email"])
        }
    }

    @Test func registrationValidatesEveryFieldAtOnce() async throws {
        try await withApp { app in
            let response = try await app.request(.post, "/v1/auth/register", json: [
                "email": "not-an-email", "username": "ab", "password": "short"])
            #expect(response.status == .badRequest)
            #expect(Set(try response.problemFields()) == ["email", "username", "password"])
            let missing = try await app.request(.post, "/v1/auth/register", json: ["email": "a@example.org"])
            #expect(missing.status == .badRequest)
            #expect(try missing.problemFields() == ["username"])
        }
    }

    @Test(arguments: ["a b@example.org", "@example.org", "a@b", "a@@example.org", "a@example..org", "a\r\n@example.org"])
    func badEmailShapesAreRejected(email: String) async throws {
        try await withApp { app in
            let response = try await app.request(.post, "/v1/auth/register", json: [
                "email": email, "username": "emailtest", "password": "correct horse battery"])
            #expect(response.status == .badRequest)
            #expect(try response.problemFields() == ["email"])
        }
    }

    @Test func passwordLengthLimitsAreInclusive() async throws {
        try await withApp { app in
            let ten = try await app.request(.post, "/v1/auth/register", json: [
                "email": "ten@example.org", "username": "ten_chars", "password": "0123456789"])
            #expect(ten.status == .created)
            let long = try await app.request(.post, "/v1/auth/register", json: [
                "email": "long@example.org", "username": "long_pw", "password": String(repeating: "x", count: 129)])
            #expect(long.status == .badRequest)
        }
    }

    @Test func loginWorksWithEmailOrUsername() async throws {
        try await withApp { app in
            let account = try await app.register(username: "reader", email: "Reader@Example.org")
            for login in ["reader", "READER", "reader@example.org", " Reader@Example.org "] {
                let response = try await app.request(.post, "/v1/auth/login", json: ["login": login, "password": account.password])
                #expect(response.status == .ok, "login as \(login)")
                #expect(try response.jsonObject()["token"] is String)
            }
        }
    }

    @Test func loginWithWrongPasswordLooksLikeUnknownUser() async throws {
        try await withApp { app in
            let account = try await app.register()
            let wrong = try await app.request(.post, "/v1/auth/login", json: ["login": account.username, "password": "wrong password!"])
            let unknown = try await app.request(.post, "/v1/auth/login", json: ["login": "nobody_here", "password": "wrong password!"])
            #expect(wrong.status == .unauthorized)
            #expect(unknown.status == .unauthorized)
            #expect(String(buffer: wrong.body) == String(buffer: unknown.body))
            #expect(try wrong.jsonObject()["type"] as? String == "https://bookworm.example/problems/invalid_credentials")
        }
    }

    @Test func unknownLoginCostsAPasswordVerification() async throws {
        // Timing parity by construction: the unknown-account path runs exactly one Argon2
        // verification, like the wrong-password path (counted, not timed).
        try await withTestDatabase { _, raw in
            let client = Database.forTests(raw)
            let logger = Logger(label: "test")
            let hasher = try PasswordHasher(settings: .fastForTests)
            let users = AccountsStore(client: client, logger: logger)
            let clock = ManualClock()
            let sessions = SessionStore(client: client, policy: SessionPolicy(), logger: logger, clock: clock)
            let throttles = ThrottleStore(client: client, logger: logger, clock: clock)
            let mail = AccountMail(client: client, users: users, sessions: sessions,
                                   verifications: VerificationStore(client: client, logger: logger, clock: clock),
                                   outbox: OutboxStore(client: client, logger: logger, clock: clock),
                                   templates: MailTemplates(from: "t <t@example.org>", publicBaseURL: "http://x", clock: clock),
                                   throttles: throttles, hasher: hasher, logger: logger)
            let service = AccountsService(client: client, users: users, sessions: sessions, throttles: throttles, hasher: hasher,
                                          mail: mail, policy: ThrottlePolicy(), logger: logger)
            _ = try await service.register(.init(email: "real@example.org", emailNormalized: "real@example.org", username: "real_user",
                                                 displayName: nil, password: "correct horse battery"), clientAddress: "a")
            for login in ["ghost_user", "real_user"] {
                let before = hasher.completedCount
                await #expect(throws: AccountsService.invalidCredentials) {
                    try await service.login(login: login, password: "wrong password!", clientAddress: "b")
                }
                #expect(hasher.completedCount == before + 1, "\(login)")
            }
        }
    }

    @Test func meRequiresAValidToken() async throws {
        try await withApp { app in
            #expect(try await app.request(.get, "/v1/me").status == .unauthorized)
            #expect(try await app.request(.get, "/v1/me", token: "bw_forged").status == .unauthorized)
            let basic = try await app.request(.get, "/v1/me", headers: [.authorization: "Basic Zm9vOmJhcg=="])
            #expect(basic.status == .unauthorized)
            #expect(basic.isProblem)
            let account = try await app.register()
            let me = try await app.request(.get, "/v1/me", token: account.token)
            #expect(me.status == .ok)
            #expect(try me.jsonObject()["username"] as? String == account.username)
        }
    }

    @Test func bearerSchemeIsCaseInsensitiveAndTheTokenMayHaveBlanksAround() async throws {
        try await withApp { app in
            let account = try await app.register()
            for header in ["bearer \(account.token)", "BEARER \(account.token)", "Bearer \t \(account.token)  ", "bEaReR  \(account.token)\t"] {
                #expect(try await app.request(.get, "/v1/me", headers: [.authorization: header]).status == .ok, "\(header)")
            }
            for header in ["Bearer", "Bearer ", "Bearer    ", "Bearer\t\(account.token)", "Bearerx\(account.token)", "Bearer \(account.token)x",
                           "Bearer \(account.token) x", "Cearer \(account.token)"] {
                let response = try await app.request(.get, "/v1/me", headers: [.authorization: header])
                #expect(response.status == .unauthorized && response.isProblem, "\(header)")
            }
        }
    }

    @Test func meAnswers304ForAMatchingETag() async throws {
        try await withApp { app in
            let account = try await app.register()
            let first = try await app.request(.get, "/v1/me", token: account.token)
            let etag = try #require(first.headers[.eTag])
            let second = try await app.request(.get, "/v1/me", token: account.token, headers: [.ifNoneMatch: etag])
            #expect(second.status == .notModified)
            #expect(second.body.readableBytes == 0)
            _ = try await app.request(.patch, "/v1/me", json: ["bio": "changed"], token: account.token)
            let third = try await app.request(.get, "/v1/me", token: account.token, headers: [.ifNoneMatch: etag])
            #expect(third.status == .ok)
        }
    }

    @Test func logoutRevokesOnlyThatToken() async throws {
        try await withApp { app in
            let account = try await app.register()
            let other = try await app.request(.post, "/v1/auth/login", json: ["login": account.username, "password": account.password])
            let otherToken = try #require(try other.jsonObject()["token"] as? String)
            #expect(try await app.request(.post, "/v1/auth/logout", token: account.token).status == .noContent)
            #expect(try await app.request(.get, "/v1/me", token: account.token).status == .unauthorized)
            #expect(try await app.request(.get, "/v1/me", token: otherToken).status == .ok)
        }
    }

    @Test func logoutAllRevokesEveryToken() async throws {
        try await withApp { app in
            let account = try await app.register()
            let other = try await app.request(.post, "/v1/auth/login", json: ["login": account.username, "password": account.password])
            let otherToken = try #require(try other.jsonObject()["token"] as? String)
            #expect(try await app.request(.post, "/v1/auth/logout-all", token: otherToken).status == .noContent)
            #expect(try await app.request(.get, "/v1/me", token: account.token).status == .unauthorized)
            #expect(try await app.request(.get, "/v1/me", token: otherToken).status == .unauthorized)
        }
    }

    @Test func idleTokenExpires() async throws {
        try await withApp { app in
            let account = try await app.register()
            #expect(try await app.request(.get, "/v1/me", token: account.token).status == .ok)
            app.clock.advance(by: SessionPolicy().idleTimeout + 1)
            #expect(try await app.request(.get, "/v1/me", token: account.token).status == .unauthorized)
        }
    }

    @Test func absoluteExpiryWinsOverRecentUse() async throws {
        try await withApp(configure: { $0.sessions = SessionPolicy(idleTimeout: 3600, absoluteTimeout: 7200) }) { app in
            let account = try await app.register()
            for _ in 0..<2 {
                app.clock.advance(by: 3000)
                #expect(try await app.request(.get, "/v1/me", token: account.token).status == .ok)
            }
            // Used 1,300 s ago, so idle is fine; but the session is 7,300 s old.
            app.clock.advance(by: 1300)
            #expect(try await app.request(.get, "/v1/me", token: account.token).status == .unauthorized)
        }
    }

    @Test func useExtendsIdleExpiryButNotPastAbsolute() async throws {
        try await withApp(configure: { $0.sessions = SessionPolicy(idleTimeout: 3600, absoluteTimeout: 7200) }) { app in
            let account = try await app.register()
            // 3,000 s, then 6,000 s after sign-in: past the first idle expiry (3,600 s), so the
            // first use must have pushed it forward.
            for _ in 0..<2 {
                app.clock.advance(by: 3000)
                #expect(try await app.request(.get, "/v1/me", token: account.token).status == .ok)
            }
            let rows = try await app.db.query("SELECT idle_expires_at = absolute_expires_at FROM sessions")
            for try await capped in rows.decode(Bool.self) {
                #expect(capped)
            }
        }
    }
}
