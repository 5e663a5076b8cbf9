import FakePush
import Foundation
import HTTPTypes
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// `POST/GET/DELETE /v1/me/devices`: one account per phone, at most 20 per user, each gone with its session.
@Suite struct DevicesTests {
    private func deviceIDs(_ app: TestApp, _ token: String) async throws -> [String] {
        let page = try await app.request(.get, "/v1/me/devices?limit=100", token: token).jsonObject()
        return (page["data"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
    }

    private func signIn(_ app: TestApp, _ account: TestApp.Account) async throws -> String {
        let login = try await app.request(.post, "/v1/auth/login", json: ["login": account.username, "password": account.password])
        return try #require(try login.jsonObject()["token"] as? String)
    }

    @Test func theSameTokenAgainAnswers200AndKeepsOneDevice() async throws {
        try await withApp { app in
            let me = try await app.register()
            let token = FakePushProvider.apnsToken()
            let first = try await app.registerDevice(me.token, token: token)
            #expect(first.status == .created)
            let view = try first.jsonObject()
            #expect(view["platform"] as? String == "apns" && view["environment"] as? String == "production")
            #expect(view["current"] as? Bool == true && view["token"] == nil)
            let again = try await app.registerDevice(me.token, token: token.uppercased())
            #expect(again.status == .ok)
            #expect(try again.jsonObject()["id"] as? String == view["id"] as? String)
            #expect(try await deviceIDs(app, me.token) == [try #require(view["id"] as? String)])
        }
    }

    @Test func aTokenAnotherAccountRegisteredMovesToMe() async throws {
        try await withApp { app in
            let before = try await app.register()
            let after = try await app.register()
            let token = FakePushProvider.fcmToken()
            #expect(try await app.registerDevice(before.token, platform: "fcm", token: token).status == .created)
            #expect(try await app.registerDevice(after.token, platform: "fcm", token: token).status == .created)
            #expect(try await deviceIDs(app, before.token).isEmpty)
            #expect(try await deviceIDs(app, after.token).count == 1)
        }
    }

    @Test func aTwentyFirstDevicePushesOutTheOldest() async throws {
        try await withApp { app in
            let me = try await app.register()
            var ids: [String] = []
            for _ in 0..<21 {
                app.clock.advance(by: 1)
                let made = try await app.registerDevice(me.token, token: FakePushProvider.apnsToken())
                ids.append(try #require(try made.jsonObject()["id"] as? String))
            }
            let kept = try await deviceIDs(app, me.token)
            #expect(kept == Array(ids.dropFirst().reversed()))
        }
    }

    @Test func concurrentRegistrationsNeverLeaveMoreThanTwenty() async throws {
        try await withApp { app in
            let me = try await app.register()
            try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                // 30 at once on a pool of 4: a request may wait out the pool's deadline (503) and is
                // sent again, as a client retries a 503.
                for _ in 0..<30 {
                    group.addTask {
                        let token = FakePushProvider.apnsToken()
                        for _ in 0..<10 {
                            let status = try await app.registerDevice(me.token, token: token).status
                            if status != .serviceUnavailable { return status }
                        }
                        return .serviceUnavailable
                    }
                }
                // A 503 can come after the registration committed (the answer's sync position could
                // not be read in time): the retry then finds the phone registered, 200.
                for try await status in group { #expect(status == .created || status == .ok) }
            }
            #expect(try await deviceIDs(app, me.token).count == 20)
        }
    }

    @Test func aDeviceGoesWithItsSession() async throws {
        try await withApp { app in
            let me = try await app.register()
            let second = try await signIn(app, me)
            let third = try await signIn(app, me)
            for session in [me.token, second, third] {
                #expect(try await app.registerDevice(session, token: FakePushProvider.apnsToken()).status == .created)
            }
            #expect(try await app.request(.post, "/v1/auth/logout", token: third).status == .noContent)
            #expect(try await deviceIDs(app, me.token).count == 2)
            // A password change signs the other sessions out, and their phones with them.
            let change = try await app.request(.post, "/v1/me/password", json: [
                "current_password": me.password, "new_password": "a brand new passphrase"], token: me.token)
            #expect(change.status == .noContent)
            let left = try await app.request(.get, "/v1/me/devices", token: me.token).jsonObject()["data"] as? [[String: Any]]
            #expect(left?.count == 1 && left?.first?["current"] as? Bool == true)
            #expect(try await app.request(.post, "/v1/auth/logout-all", token: me.token).status == .noContent)
            for try await count in try await app.db.query("SELECT count(*)::int8 FROM devices").decode(Int.self) { #expect(count == 0) }
        }
    }

    @Test func aSuspendedUsersDevicesAreRemoved() async throws {
        try await withApp { app in
            let mallory = try await app.register()
            #expect(try await app.registerDevice(mallory.token, token: FakePushProvider.apnsToken()).status == .created)
            #expect(try await app.bookworm(["users", "suspend", mallory.username, "--reason", "spam"]).status == 0)
            for try await count in try await app.db.query("SELECT count(*)::int8 FROM devices").decode(Int.self) { #expect(count == 0) }
        }
    }

    @Test func someoneElsesDeviceIsNotFound() async throws {
        try await withApp { app in
            let me = try await app.register()
            let other = try await app.register()
            let made = try await app.registerDevice(other.token, token: FakePushProvider.apnsToken())
            let id = try #require(try made.jsonObject()["id"] as? String)
            #expect(try await app.request(.delete, "/v1/me/devices/\(id)", token: me.token).status == .notFound)
            #expect(try await app.request(.delete, "/v1/me/devices/\(id)", token: other.token).status == .noContent)
            #expect(try await deviceIDs(app, other.token).isEmpty)
        }
    }

    @Test func badRegistrationsNameTheirField() async throws {
        try await withApp { app in
            let me = try await app.register()
            let cases: [([String: any Sendable], HTTPResponse.Status, String)] = [
                (["platform": "webpush", "token": FakePushProvider.apnsToken()], .badRequest, "platform"),
                (["platform": "apns", "token": "short"], .badRequest, "token"),
                (["platform": "fcm", "token": String(repeating: "a", count: 40) + "/../"], .badRequest, "token"),
                (["platform": "apns", "token": String(repeating: "z", count: 64)], .unprocessableContent, "token"),
                (["platform": "apns", "token": FakePushProvider.apnsToken(), "environment": "staging"], .badRequest, "environment"),
                (["platform": "apns"], .badRequest, "token"),
            ]
            for (body, status, field) in cases {
                let response = try await app.request(.post, "/v1/me/devices", json: body, token: me.token)
                #expect(response.status == status)
                #expect(try response.problemFields() == [field])
            }
            #expect(try await app.request(.post, "/v1/me/devices", json: ["platform": "apns", "token": FakePushProvider.apnsToken()])
                .status == .unauthorized)
        }
    }

    @Test func pushPreferencesShowAndChangeOneKindAtATime() async throws {
        try await withApp { app in
            let me = try await app.register()
            #expect(try await app.request(.get, "/v1/me", token: me.token).jsonObject()["push"] as? [String: Bool]
                == ["trades": true, "alerts": true, "contact": true])
            _ = try await app.request(.patch, "/v1/me", json: ["push": ["alerts": false, "contact": false]], token: me.token)
            let back = try await app.request(.patch, "/v1/me", json: ["push": ["contact": true]], token: me.token)
            #expect(try back.jsonObject()["push"] as? [String: Bool] == ["trades": true, "alerts": false, "contact": true])
            let unknown = try await app.request(.patch, "/v1/me", json: ["push": ["news": true]], token: me.token)
            #expect(unknown.status == .badRequest)
            #expect(try unknown.problemFields() == ["push.news"])
            let notBool = try await app.request(.patch, "/v1/me", json: ["push": ["trades": "no"]], token: me.token)
            #expect(notBool.status == .badRequest)
            #expect(try await app.request(.patch, "/v1/me", raw: #"{"push": null}"#, token: me.token).status == .badRequest)
        }
    }
}
