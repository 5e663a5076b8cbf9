import FakePush
import Foundation
import HTTPTypes
import Logging
import NIOConcurrencyHelpers
import Testing
@testable import BookwormCore
@testable import Mail
@testable import BookwormApp
@testable import BookwormTestSupport

/// Pushes through a fake APNs and FCM over real HTTP/2 and TLS, with real signatures.
@Suite struct PushTests {
    /// An owner with a phone, a copy, and a second account asking for it.
    private func requestedTrade(_ app: TestApp, platform: String = "apns", token: String) async throws
        -> (owner: TestApp.Account, trade: String) {
        let owner = try await app.registerTrader()
        let asker = try await app.registerTrader()
        #expect(try await app.registerDevice(owner.token, platform: platform, token: token).status == .created)
        let copy = try await app.copyID(owner.token, title: "Middlemarch")
        return (owner, try await app.trade(asker.token, copy: copy))
    }

    @Test func aTradeRequestBuzzesTheOwnersPhoneOnceWithTheTrade() async throws {
        try await withPushApp { app, fake in
            let token = FakePushProvider.apnsToken()
            let (_, trade) = try await requestedTrade(app, token: token)
            let tokens = try await app.sendPushes(fake)
            let pushes = fake.received
            #expect(pushes.count == 1)
            let push = try #require(pushes.first)
            #expect(push.provider == "apns" && push.environment == "production" && push.token == token)
            #expect(push.kind == "trade" && push.id == trade && push.collapseID == "trade-\(trade)")
            #expect(push.title.contains("asks for \"Middlemarch\""))
            #expect(!push.body.contains("@"))
            #expect(fake.refusals.isEmpty)
            #expect(tokens.apns == 1)
            #expect(try await app.queuedPushes().isEmpty)
        }
    }

    @Test func anFCMPhoneGetsItWithAnAccessTokenFromTheServiceAccount() async throws {
        try await withPushApp { app, fake in
            let token = FakePushProvider.fcmToken()
            let (_, trade) = try await requestedTrade(app, platform: "fcm", token: token)
            try await app.sendPushes(fake)
            #expect(fake.received.map(\.id) == [trade])
            #expect(fake.received.first?.provider == "fcm" && fake.received.first?.collapseID == "trade-\(trade)")
            #expect(fake.grants == 1)
            #expect(fake.refusals.isEmpty)
        }
    }

    @Test func aSandboxPhoneIsPushedThroughTheSandbox() async throws {
        try await withPushApp { app, fake in
            let owner = try await app.registerTrader()
            let asker = try await app.registerTrader()
            #expect(try await app.registerDevice(owner.token, token: FakePushProvider.apnsToken(), environment: "sandbox").status == .created)
            _ = try await app.trade(asker.token, copy: try await app.copyID(owner.token))
            try await app.sendPushes(fake)
            #expect(fake.received.map(\.environment) == ["sandbox"])
        }
    }

    @Test func aDeviceTheProviderCallsGoneIsDeletedAndNotRetried() async throws {
        try await withPushApp { app, fake in
            let cases: [(String, String, FakePushProvider.Answer)] = [
                ("apns", FakePushProvider.apnsToken(), .status(410, reason: "Unregistered")),
                ("apns", FakePushProvider.apnsToken(), .status(400, reason: "BadDeviceToken")),
                ("fcm", FakePushProvider.fcmToken(), .status(404, reason: "UNREGISTERED")),
            ]
            for (platform, token, answer) in cases {
                fake.script(token, [answer])
                _ = try await requestedTrade(app, platform: platform, token: token)
            }
            try await app.sendPushes(fake)
            app.clock.advance(by: 7200)
            try await app.sendPushes(fake)
            for (_, token, _) in cases { #expect(fake.attempts(token) == 1) }
            #expect(fake.received.isEmpty)
            #expect(try await app.queuedPushes().isEmpty)
            for try await count in try await app.db.query("SELECT count(*)::int8 FROM devices").decode(Int.self) { #expect(count == 0) }
        }
    }

    /// A wrong `APNS_TOPIC` is answered `DeviceTokenNotForTopic` for every phone: nobody's device goes.
    @Test func aTopicRefusalKeepsTheDevice() async throws {
        try await withPushApp { app, fake in
            let token = FakePushProvider.apnsToken()
            fake.script(token, [.status(400, reason: "DeviceTokenNotForTopic")])
            let (owner, _) = try await requestedTrade(app, token: token)
            try await app.sendPushes(fake)
            #expect(fake.attempts(token) == 1 && fake.received.isEmpty)
            #expect(try await app.queuedPushes().isEmpty)
            let devices = try await app.request(.get, "/v1/me/devices", token: owner.token).jsonObject()["data"] as? [[String: Any]]
            #expect(devices?.count == 1)
        }
    }

    /// Pushes queued for one account never reach the next account that signs in on the phone.
    @Test func aPhoneThatChangesAccountsGetsNoneOfTheOldAccountsPushes() async throws {
        try await withPushApp { app, fake in
            let token = FakePushProvider.apnsToken()
            _ = try await requestedTrade(app, token: token)
            let next = try await app.registerTrader()
            #expect(try await app.registerDevice(next.token, token: token).status == .created)
            #expect(try await app.queuedPushes().isEmpty)
            _ = try await app.trade(try await app.registerTrader().token, copy: try await app.copyID(next.token, title: "Emma"))
            try await app.sendPushes(fake)
            #expect(fake.received.map(\.title).count == 1)
            #expect(fake.received.first?.title.contains("Emma") == true)
        }
    }

    /// Many batches, two out at once: every push goes out once and every job is finished.
    @Test func batchesOverlapAndEachPushGoesOnce() async throws {
        try await withPushApp { app, fake in
            let owner = try await app.registerTrader()
            let tokens = (0..<7).map { _ in FakePushProvider.apnsToken() }
            for token in tokens { #expect(try await app.registerDevice(owner.token, token: token).status == .created) }
            _ = try await app.trade(try await app.registerTrader().token, copy: try await app.copyID(owner.token))
            #expect(try await app.queuedPushes().count == 7)
            try await app.sendPushes(fake, batchSize: 2)
            #expect(fake.received.map(\.token).sorted() == tokens.sorted())
            #expect(fake.connections == 1)
            #expect(try await app.queuedPushes().isEmpty)
        }
    }

    @Test func anExpiredProviderTokenIsRenewedAndThePushSentOnce() async throws {
        try await withPushApp { app, fake in
            let token = FakePushProvider.apnsToken()
            fake.script(token, [.status(403, reason: "ExpiredProviderToken")])
            _ = try await requestedTrade(app, token: token)
            let tokens = try await app.sendPushes(fake)
            #expect(fake.received.count == 1)
            #expect(fake.attempts(token) == 2)
            #expect(tokens.apns == 2)
            #expect(fake.providerTokensSeen == 2)
        }
    }

    @Test func theProviderTokenIsSignedOncePerFiftyMinutes() async throws {
        try await withPushApp { app, fake in
            let owner = try await app.registerTrader()
            #expect(try await app.registerDevice(owner.token, token: FakePushProvider.apnsToken()).status == .created)
            try await app.withPushWorker(fake) { runner, transport in
                for minute in [0, 20, 49, 51] {
                    app.clock.advance(by: minute == 0 ? 0 : (minute == 20 ? 1200 : (minute == 49 ? 1740 : 120)))
                    let asker = try await app.registerTrader()
                    _ = try await app.trade(asker.token, copy: try await app.copyID(owner.token, title: "Book \(minute)"))
                    while try await runner.runDue() > 0 {}
                    #expect(await transport.tokensMade().apns == (minute < 50 ? 1 : 2))
                }
            }
            #expect(fake.received.count == 4)
            #expect(fake.providerTokensSeen == 2)
        }
    }

    @Test func anExpiredAccessTokenIsRenewedOnce() async throws {
        try await withPushApp { app, fake in
            let token = FakePushProvider.fcmToken()
            let owner = try await app.registerTrader()
            #expect(try await app.registerDevice(owner.token, platform: "fcm", token: token).status == .created)
            try await app.withPushWorker(fake) { runner, _ in
                _ = try await app.trade(try await app.registerTrader().token, copy: try await app.copyID(owner.token))
                while try await runner.runDue() > 0 {}
                fake.expireAccessTokens()
                _ = try await app.trade(try await app.registerTrader().token, copy: try await app.copyID(owner.token, title: "Two"))
                while try await runner.runDue() > 0 {}
            }
            #expect(fake.received.count == 2)
            #expect(fake.grants == 2)
        }
    }

    @Test func a429IsRetriedAfterItsRetryAfterThenSent() async throws {
        try await withPushApp { app, fake in
            let token = FakePushProvider.apnsToken()
            fake.script(token, [.status(429, reason: "TooManyRequests", retryAfter: "120")])
            _ = try await requestedTrade(app, token: token)
            try await app.sendPushes(fake)
            let waiting = try #require(try await app.queuedPushes().first)
            #expect(waiting.attempts == 1 && (119...121).contains(waiting.dueIn) && waiting.error?.contains("429") == true)
            app.clock.advance(by: 100)
            try await app.sendPushes(fake)
            #expect(fake.attempts(token) == 1)
            app.clock.advance(by: 21)
            try await app.sendPushes(fake)
            #expect(fake.received.count == 1)
            #expect(try await app.queuedPushes().isEmpty)
        }
    }

    @Test func aServerErrorOrNoAnswerIsRetriedWithBackoffAndAnyOther4xxNever() async throws {
        try await withPushApp { app, fake in
            let failing = FakePushProvider.apnsToken(), silent = FakePushProvider.apnsToken(), refused = FakePushProvider.apnsToken()
            fake.script(failing, [.status(500, reason: "InternalServerError"), .status(503, reason: "ServiceUnavailable")])
            fake.script(silent, [.silent])
            fake.script(refused, [.status(400, reason: "PayloadTooLarge")])
            for token in [failing, silent, refused] { _ = try await requestedTrade(app, token: token) }
            // The silent provider is waited out; the others answer long before (a timeout of 3 s
            // was reached by a loaded machine's answers, and a refused push then went again).
            try await app.sendPushes(fake, timeout: 15)
            let waiting = try await app.queuedPushes()
            #expect(waiting.count == 2)
            #expect(waiting.allSatisfy { $0.attempts == 1 && $0.dueIn >= 20 })
            for _ in 0..<3 {
                app.clock.advance(by: 3600)
                try await app.sendPushes(fake)
            }
            #expect(Set(fake.received.map(\.token)) == [failing, silent])
            #expect(fake.attempts(failing) == 3 && fake.attempts(silent) == 2 && fake.attempts(refused) == 1)
            #expect(try await app.queuedPushes().isEmpty)
        }
    }

    @Test func aPushThatKeepsFailingIsDroppedAfterItsLastTry() async throws {
        try await withPushApp { app, fake in
            let token = FakePushProvider.apnsToken()
            fake.script(token, Array(repeating: .status(503, reason: "ServiceUnavailable"), count: 20))
            _ = try await requestedTrade(app, token: token)
            for _ in 0..<12 {
                try await app.sendPushes(fake)
                app.clock.advance(by: 5000)
            }
            #expect(fake.attempts(token) == PushSettings().maxAttempts)
            #expect(try await app.queuedPushes().isEmpty)
        }
    }

    @Test func logoutStopsPushesToThatPhone() async throws {
        try await withPushApp { app, fake in
            let token = FakePushProvider.apnsToken()
            let (owner, _) = try await requestedTrade(app, token: token)
            #expect(try await app.request(.post, "/v1/auth/logout", token: owner.token).status == .noContent)
            try await app.sendPushes(fake)
            #expect(fake.attempts(token) == 0)
            #expect(try await app.queuedPushes().isEmpty)
        }
    }

    @Test func aKindTurnedOffPushesNothingAndTheOthersStillGo() async throws {
        try await withPushApp { app, fake in
            let token = FakePushProvider.apnsToken()
            let owner = try await app.registerTrader()
            #expect(try await app.registerDevice(owner.token, token: token).status == .created)
            let off = try await app.request(.patch, "/v1/me", json: ["push": ["trades": false]], token: owner.token)
            #expect(off.status == .ok)
            #expect(try off.jsonObject()["push"] as? [String: Bool] == ["trades": false, "alerts": true, "contact": true])
            let asker = try await app.registerTrader()
            _ = try await app.trade(asker.token, copy: try await app.copyID(owner.token))
            #expect(try await app.request(.post, "/v1/contact", json: ["to_username": owner.username, "message": "Hello there", "share_email": false],
                                          token: asker.token).status == .accepted)
            try await app.sendPushes(fake)
            #expect(fake.received.map(\.kind) == ["contact"])
            #expect(fake.received.first?.title == "\(asker.username) wrote to you")
            #expect(fake.received.first?.body.contains("Hello there") == false)
        }
    }

    /// A trade for someone without a phone queues no push, and wakes no job runner anywhere.
    @Test func anEventForSomeoneWithoutAPhoneWakesNoRunner() async throws {
        try await withPushApp { app, _ in
            let owner = try await app.registerTrader()
            let asker = try await app.registerTrader()
            let (first, second) = (try await app.copyID(owner.token), try await app.copyID(owner.token, title: "Two"))
            let heard = NIOLockedValueBox<[String]>([])
            let (ready, listening) = AsyncStream.makeStream(of: Void.self)
            let listener = Task {
                await app.db.listen("jobs", logger: Logger(label: "test-listen"), listening: { if $0 { listening.yield() } }) { payload in
                    heard.withLockedValue { $0.append(payload) }
                }
            }
            defer { listener.cancel() }
            var iterator = ready.makeAsyncIterator()
            await iterator.next()
            _ = try await app.trade(asker.token, copy: first)
            try await app.db.query("NOTIFY jobs, 'first'")
            // The control: with a phone, the push's insert is heard.
            #expect(try await app.registerDevice(owner.token, token: FakePushProvider.apnsToken()).status == .created)
            _ = try await app.trade(asker.token, copy: second)
            try await app.db.query("NOTIFY jobs, 'second'")
            #expect(try await eventually(within: 30) { heard.withLockedValue { $0.last == "second" } })
            #expect(heard.withLockedValue { $0 } == ["first", "", "second"])
        }
    }

    @Test func withNoProviderNothingIsQueued() async throws {
        try await withApp { app in
            let owner = try await app.registerTrader()
            #expect(try await app.registerDevice(owner.token, token: FakePushProvider.apnsToken()).status == .created)
            _ = try await app.trade(try await app.registerTrader().token, copy: try await app.copyID(owner.token))
            #expect(try await app.queuedPushes().isEmpty)
        }
    }
}
