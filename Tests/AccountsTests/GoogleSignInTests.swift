import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing
@testable import BookwormCore
@testable import Accounts
@testable import BookwormTestSupport

/// Google sign-in against a fake Google: tokens signed in the test with its own RSA key, the
/// key set served over HTTP on loopback.
@Suite struct GoogleSignInTests {
    func withGoogleApp(_ body: @escaping @Sendable (TestApp, FakeGoogle) async throws -> Void) async throws {
        try await withFakeGoogle { google in
            try await withApp(configure: {
                $0.google.clientIDs = ["another-client.apps.googleusercontent.com", FakeGoogle.clientID]
                $0.google.jwksURL = google.jwksURL
                // The fake serves from the test process's cooperative threads, which a full run
                // keeps busy: a missed fetch would leave the key set empty until the (never
                // advanced) clock allows another.
                $0.google.fetchTimeout = 60
            }) { app in try await body(app, google) }
        }
    }

    func signIn(_ app: TestApp, _ token: String) async throws -> TestResponse {
        try await app.request(.post, "/v1/auth/google", json: ["id_token": token])
    }

    @Test func aFirstSignInMakesAVerifiedAccountAndTheNextFindsItBySubject() async throws {
        try await withGoogleApp { app, google in
            var claims = FakeGoogle.Claims(now: app.clock.now())
            claims.email = "Ada.Lovelace+books@Gmail.com"
            let first = try await signIn(app, try await google.token(claims))
            #expect(first.status == .ok, "\(String(buffer: first.body))")
            let body = try first.jsonObject()
            #expect(body["created"] as? Bool == true)
            let user = try #require(body["user"] as? [String: Any])
            #expect(user["username"] as? String == "ada_lovelace_books")
            #expect(user["email_verified"] as? Bool == true)
            let token = try #require(body["token"] as? String)
            #expect(try await app.request(.get, "/v1/me", token: token).status == .ok)

            // Same subject, new address at Google: still the same account, found by subject.
            claims.email = "ada@example.org"
            let again = try await signIn(app, try await google.token(claims)).jsonObject()
            #expect(again["created"] as? Bool == false)
            #expect((again["user"] as? [String: Any])?["id"] as? String == user["id"] as? String)
            #expect(google.fetches == 1, "the key set is cached as Cache-Control says")

            // A second person whose address makes the same name gets another one.
            var other = FakeGoogle.Claims(now: app.clock.now())
            other.email = "ada.lovelace.books@gmail.com"
            let second = try await signIn(app, try await google.token(other)).jsonObject()
            let name = try #require((second["user"] as? [String: Any])?["username"] as? String)
            #expect(name.hasPrefix("ada_lovelace_books_") && name.count == "ada_lovelace_books_0000".count)
        }
    }

    @Test func everyBadTokenIsTheSame401() async throws {
        try await withGoogleApp { app, google in
            let now = app.clock.now()
            var wrongAudience = FakeGoogle.Claims(now: now)
            wrongAudience.audience = "someone-else.apps.googleusercontent.com"
            var wrongIssuer = FakeGoogle.Claims(now: now)
            wrongIssuer.issuer = "https://evil.example.com"
            var expired = FakeGoogle.Claims(now: now.addingTimeInterval(-7200))
            expired.expires = now.addingTimeInterval(-61)
            var unverified = FakeGoogle.Claims(now: now)
            unverified.emailVerified = false
            var tokens = try await [wrongAudience, wrongIssuer, expired, unverified].asyncMap { try await google.token($0) }
            tokens += try await google.forgedTokens(FakeGoogle.Claims(now: now))
            tokens += ["not.a.token", "", String(repeating: "a", count: 9000)]
            for (index, token) in tokens.enumerated() {
                let response = try await signIn(app, token)
                #expect(response.status == (token.isEmpty || token.count > 8192 ? .badRequest : .unauthorized), "token \(index)")
                #expect(response.isProblem)
            }
            // Within the 60 s leeway an expiry on the app's clock still passes; past it, not.
            var justExpired = FakeGoogle.Claims(now: now.addingTimeInterval(-3600))
            justExpired.expires = now.addingTimeInterval(-30)
            #expect(try await signIn(app, try await google.token(justExpired)).status == .ok)
            app.clock.advance(by: 31)
            #expect(try await signIn(app, try await google.token(justExpired)).status == .unauthorized)
        }
    }

    @Test func anUnknownKeyIdIsFetchedForOnceThenRefused() async throws {
        try await withGoogleApp { app, google in
            let claims = FakeGoogle.Claims(now: app.clock.now())
            #expect(try await signIn(app, try await google.token(claims)).status == .ok)
            #expect(google.fetches == 1)
            app.clock.advance(by: 61)
            try google.addKey("never-published", published: false)
            let stranger = try await google.token(claims, kid: "never-published")
            #expect(try await signIn(app, stranger).status == .unauthorized)
            #expect(google.fetches == 2, "an unknown kid refetches the key set once")
            #expect(try await signIn(app, stranger).status == .unauthorized)
            #expect(google.fetches == 2, "and not again within the minute")
            app.clock.advance(by: 30)
            #expect(try await signIn(app, stranger).status == .unauthorized)
            #expect(google.fetches == 2)

            // Google rotates: a new published key is found on the next allowed fetch.
            try google.addKey("rotated", published: true)
            app.clock.advance(by: 31)
            #expect(try await signIn(app, try await google.token(claims, kid: "rotated")).status == .ok)
            #expect(google.fetches == 3)
        }
    }

    /// The pre-hijack: an attacker registers the victim's address with a password and never
    /// verifies it. The victim's Google sign-in must not hand the attacker's account to the
    /// victim, nor attach the victim's Google identity to the attacker's account.
    @Test func aPreHijackedAddressIsNeverLinkedEitherWay() async throws {
        try await withGoogleApp { app, google in
            var claims = FakeGoogle.Claims(now: app.clock.now())
            claims.email = "victim@gmail.com"
            let attacker = try await app.register(email: "victim@gmail.com", password: "attacker's password")
            let response = try await signIn(app, try await google.token(claims))
            #expect(response.status == .conflict)
            #expect(try (response.jsonObject()["type"] as? String)?.hasSuffix("link_required") == true)
            #expect(!String(buffer: response.body).contains("bw_"))
            #expect(try await app.count("SELECT count(*)::int8 FROM identities", user: attacker.id) == 0)
            // The attacker's session still sees an unverified account with no Google in it.
            let me = try await app.request(.get, "/v1/me", token: attacker.token).jsonObject()
            #expect(me["email_verified"] as? Bool == false)
            #expect(try await signIn(app, try await google.token(claims)).status == .conflict)
        }
    }

    @Test func aVerifiedAddressLinksAutomaticallyAndSignsOutTheOtherSessions() async throws {
        try await withSink { sink in
            try await withGoogleApp { app, google in
                let owner = try await app.registerVerified(sink)
                var claims = FakeGoogle.Claims(now: app.clock.now())
                claims.email = owner.email.uppercased()
                let response = try await signIn(app, try await google.token(claims))
                #expect(response.status == .ok)
                let body = try response.jsonObject()
                #expect(body["created"] as? Bool == false)
                #expect((body["user"] as? [String: Any])?["id"] as? String == owner.id)
                #expect(try await app.request(.get, "/v1/me", token: owner.token).status == .unauthorized)
                let token = try #require(body["token"] as? String)
                // The password still works, so Google can be unlinked; then it is a new account's no more.
                #expect(try await app.request(.delete, "/v1/me/identities/google", token: token).status == .noContent)
                #expect(try await app.request(.delete, "/v1/me/identities/google", token: token).status == .notFound)
            }
        }
    }

    @Test func linkingWhileSignedInAndUnlinkingTheOnlyWayIn() async throws {
        try await withGoogleApp { app, google in
            let alice = try await app.register()
            let other = try await app.request(.post, "/v1/auth/login", json: ["login": alice.username, "password": alice.password])
            let otherToken = try #require(try other.jsonObject()["token"] as? String)
            var claims = FakeGoogle.Claims(now: app.clock.now())
            claims.email = "alice.elsewhere@gmail.com"
            let token = try await google.token(claims)
            #expect(try await app.request(.post, "/v1/me/identities/google", json: ["id_token": token], token: alice.token).status == .noContent)
            #expect(try await app.request(.get, "/v1/me", token: alice.token).status == .ok)
            #expect(try await app.request(.get, "/v1/me", token: otherToken).status == .unauthorized, "other sessions are revoked")
            let signedIn = try await signIn(app, token).jsonObject()
            #expect((signedIn["user"] as? [String: Any])?["username"] as? String == alice.username)

            // Someone else cannot link the same Google account.
            let bob = try await app.register()
            #expect(try await app.request(.post, "/v1/me/identities/google", json: ["id_token": token], token: bob.token).status == .conflict)

            // An account made by Google has no password: unlinking would lock its owner out.
            let fresh = try await signIn(app, try await google.token(FakeGoogle.Claims(now: app.clock.now()))).jsonObject()
            let freshToken = try #require(fresh["token"] as? String)
            let refused = try await app.request(.delete, "/v1/me/identities/google", token: freshToken)
            #expect(try refused.status == .conflict && (refused.jsonObject()["type"] as? String)?.hasSuffix("only_sign_in") == true)
        }
    }

    /// An account made by Google has no password; it proves itself with Google to be erased.
    @Test func anAccountWithoutAPasswordIsErasedWithItsGoogleToken() async throws {
        try await withGoogleApp { app, google in
            let claims = FakeGoogle.Claims(now: app.clock.now())
            let signedIn = try await signIn(app, try await google.token(claims)).jsonObject()
            let token = try #require(signedIn["token"] as? String)
            let stranger = try await google.token(FakeGoogle.Claims(now: app.clock.now()))
            let wrong = try await app.request(.delete, "/v1/me", json: ["id_token": stranger], token: token)
            #expect(try wrong.status == .unprocessableContent && wrong.problemFields() == ["id_token"])
            let both = try await app.request(.delete, "/v1/me", json: ["id_token": stranger, "password": "x"], token: token)
            #expect(both.status == .badRequest)
            #expect(try await app.request(.delete, "/v1/me", json: ["password": "anything at all"], token: token).status
                    == .unprocessableContent)
            let erased = try await app.request(.delete, "/v1/me", json: ["id_token": try await google.token(claims)], token: token)
            #expect(erased.status == .accepted)
            #expect(try await app.count("SELECT count(*)::int8 FROM identities", user: "") == 0)
            // The same Google account signs up afresh: a new account.
            #expect(try await signIn(app, try await google.token(claims)).jsonObject()["created"] as? Bool == true)
        }
    }

    @Test func withoutClientIdsGoogleSignInIsNotThere() async throws {
        try await withApp { app in
            let alice = try await app.register()
            #expect(try await app.request(.post, "/v1/auth/google", json: ["id_token": "x.y.z"]).status == .notFound)
            #expect(try await app.request(.post, "/v1/me/identities/google", json: ["id_token": "x.y.z"], token: alice.token).status
                    == .notFound)
            #expect(try await app.request(.delete, "/v1/me/identities/google", token: alice.token).status == .notFound)
        }
    }
}

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}

@Suite struct GoogleKeysUnreachableTests {
    @Test func whenGooglesKeysCannotBeFetchedSignInIsA503NotA500() async throws {
        let closed = try ServerProcess.freePort()
        try await withApp(configure: {
            $0.google.clientIDs = [FakeGoogle.clientID]
            $0.google.jwksURL = "http://127.0.0.1:\(closed)/certs"
        }) { app in
            let token = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiIxIn0.c2ln"
            let response = try await app.request(.post, "/v1/auth/google", json: ["id_token": token])
            #expect(response.status == .serviceUnavailable && response.isProblem)
        }
    }
}
