import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

@Suite struct ProfileTests {
    @Test func patchMeUpdatesAndClearsFields() async throws {
        try await withApp { app in
            let account = try await app.register()
            let set = try await app.request(.patch, "/v1/me", json: ["display_name": "  Ann  ", "bio": "Reads a lot"], token: account.token)
            #expect(set.status == .ok)
            #expect(try set.jsonObject()["display_name"] as? String == "Ann")
            let partial = try await app.request(.patch, "/v1/me", json: ["bio": NSNull()], token: account.token)
            let body = try partial.jsonObject()
            #expect(body["display_name"] as? String == "Ann")
            #expect(body["bio"] is NSNull)
        }
    }

    /// Alert mail is always one of three settings: there is nothing for null to clear to.
    @Test func patchingAlertsWithNullIsABadRequestNamingAlerts() async throws {
        try await withApp { app in
            let account = try await app.register()
            #expect(try await app.request(.patch, "/v1/me", json: ["alerts": "off"], token: account.token).status == .ok)
            let patch = try await app.request(.patch, "/v1/me", json: ["alerts": NSNull(), "bio": "Kept?"], token: account.token)
            #expect(patch.status == .badRequest)
            #expect(try patch.problemFields() == ["alerts"])
            let unrelated = try await app.request(.patch, "/v1/me", json: ["display_name": "Ann"], token: account.token).jsonObject()
            #expect(unrelated["alerts"] as? String == "off")
            #expect(unrelated["bio"] is NSNull)
        }
    }

    @Test func patchMeRejectsFieldsItDoesNotOwn() async throws {
        try await withApp { app in
            let account = try await app.register()
            for field in ["email", "username", "id", "created_at", "email_verified"] {
                let response = try await app.request(.patch, "/v1/me", json: [field: "x"], token: account.token)
                #expect(response.status == .badRequest)
                #expect(try response.problemFields() == [field])
            }
            let me = try await app.request(.get, "/v1/me", token: account.token)
            #expect(try me.jsonObject()["username"] as? String == account.username)
        }
    }

    @Test func patchMeValidatesLengthsAndControlCharacters() async throws {
        try await withApp { app in
            let account = try await app.register()
            let long = try await app.request(.patch, "/v1/me", json: ["display_name": String(repeating: "n", count: 81)], token: account.token)
            #expect(try long.problemFields() == ["display_name"])
            let control = try await app.request(.patch, "/v1/me", json: ["display_name": "a\u{0}b"], token: account.token)
            #expect(try control.problemFields() == ["display_name"])
        }
    }

    @Test(arguments: [
        "Robert'); DROP TABLE users;--",
        "Zoë Ågren 山田 🚀 — ≠",
        "1' OR '1'='1",
        "\\x00 $1 %s {{name}}",
    ])
    func sqlLookingAndNonASCIITextIsStoredVerbatim(text: String) async throws {
        try await withApp { app in
            let account = try await app.register()
            let bio = text + "\nsecond line"
            let patch = try await app.request(.patch, "/v1/me", json: ["display_name": text, "bio": bio], token: account.token)
            #expect(patch.status == .ok)
            let me = try await app.request(.get, "/v1/me", token: account.token).jsonObject()
            #expect(me["display_name"] as? String == text)
            #expect(me["bio"] as? String == bio)
            let profile = try await app.request(.get, "/v1/users/\(account.username)").jsonObject()
            #expect(profile["display_name"] as? String == text)
            let count = try await app.db.query("SELECT count(*) FROM users")
            for try await users in count.decode(Int.self) { #expect(users == 1) }
        }
    }

    @Test func publicProfileShowsNoEmail() async throws {
        try await withApp { app in
            let account = try await app.register(username: "public_me")
            let response = try await app.request(.get, "/v1/users/PUBLIC_ME")
            #expect(response.status == .ok)
            let body = try response.jsonObject()
            #expect(Set(body.keys) == ["id", "username", "display_name", "bio", "created_at", "available_copies", "completed_trades", "rating"])
            #expect(!String(buffer: response.body).contains(account.email))
            #expect(try await app.request(.get, "/v1/users/nobody_at_all").status == .notFound)
        }
    }

    @Test func blockedEitherWayAViewerFindsNoSuchProfile() async throws {
        try await withApp { app in
            let ann = try await app.register()
            let bob = try await app.register()
            #expect(try await app.request(.put, "/v1/users/\(bob.username)/block", token: ann.token).status == .noContent)
            #expect(try await app.request(.get, "/v1/users/\(ann.username)", token: bob.token).status == .notFound)
            #expect(try await app.request(.get, "/v1/users/\(bob.username)", token: ann.token).status == .notFound)
            #expect(try await app.request(.get, "/v1/users/\(ann.username)").status == .ok)
            #expect(try await app.request(.get, "/v1/users/\(ann.username)", token: ann.token).status == .ok)
            // A token, if sent, must be valid, as on every page that takes one optionally.
            #expect(try await app.request(.get, "/v1/users/\(ann.username)", token: "not-a-token").status == .unauthorized)
            #expect(try await app.request(.delete, "/v1/users/\(bob.username)/block", token: ann.token).status == .noContent)
            #expect(try await app.request(.get, "/v1/users/\(ann.username)", token: bob.token).status == .ok)
        }
    }

    @Test func changePasswordRevokesOtherSessionsAndKeepsThisOne() async throws {
        try await withApp { app in
            let account = try await app.register()
            let other = try await app.request(.post, "/v1/auth/login", json: ["login": account.username, "password": account.password])
            let otherToken = try #require(try other.jsonObject()["token"] as? String)
            let change = try await app.request(.post, "/v1/me/password", json: [
                "current_password": account.password, "new_password": "a brand new passphrase"], token: account.token)
            #expect(change.status == .noContent)
            #expect(try await app.request(.get, "/v1/me", token: account.token).status == .ok)
            #expect(try await app.request(.get, "/v1/me", token: otherToken).status == .unauthorized)
            let oldLogin = try await app.request(.post, "/v1/auth/login", json: ["login": account.username, "password": account.password])
            #expect(oldLogin.status == .unauthorized)
            let newLogin = try await app.request(.post, "/v1/auth/login", json: [
                "login": account.username, "password": "a brand new passphrase"])
            #expect(newLogin.status == .ok)
        }
    }

    @Test func changePasswordWithWrongCurrentPasswordChangesNothing() async throws {
        try await withApp { app in
            let account = try await app.register()
            let change = try await app.request(.post, "/v1/me/password", json: [
                "current_password": "not my password", "new_password": "a brand new passphrase"], token: account.token)
            #expect(change.status == .unprocessableContent)
            #expect(try change.problemFields() == ["current_password"])
            let login = try await app.request(.post, "/v1/auth/login", json: ["login": account.username, "password": account.password])
            #expect(login.status == .ok)
        }
    }

    @Test func changePasswordValidatesTheNewOne() async throws {
        try await withApp { app in
            let account = try await app.register()
            let change = try await app.request(.post, "/v1/me/password", json: [
                "current_password": account.password, "new_password": "short"], token: account.token)
            #expect(try change.problemFields() == ["new_password"])
        }
    }
}
