import FakePush
import Foundation
import Logging
import Testing
@testable import BookwormCore
@testable import Mail
@testable import Discovery
@testable import BookwormApp
@testable import BookwormTestSupport

/// The push worker as a process, the operator's commands, and the pushes besides trade requests.
@Suite struct PushWorkerTests {
    /// A `bookworm worker` process killed with SIGKILL while its batch waits on the provider:
    /// the pushes come back when the lease ends, and each phone gets its push once.
    @Test func aWorkerKilledMidBatchLosesNothing() async throws {
        try await withPushApp { app, fake in
            var tokens: [String] = []
            for _ in 0..<6 {
                let owner = try await app.registerTrader()
                let token = FakePushProvider.apnsToken()
                fake.script(token, [.silent])
                #expect(try await app.registerDevice(owner.token, token: token).status == .created)
                _ = try await app.trade(try await app.registerTrader().token, copy: try await app.copyID(owner.token))
                tokens.append(token)
            }
            var environment = bookwormEnvironment(fake.environment.merging([
                "DATABASE_URL": app.settings.connectionURL, "BOOKWORM_PUSH_TIMEOUT_SECONDS": "120",
            ]) { $1 })
            environment["SMTP_URL"] = nil
            let pid = try ChildProcess.spawn(try bookwormBinary(), ["worker"], environment: environment)
            let inFlight = try await eventually(within: 60) { tokens.allSatisfy { fake.attempts($0) == 1 } }
            kill(pid, SIGKILL)
            ChildProcess.wait(pid)
            #expect(inFlight)
            #expect(fake.received.isEmpty)
            #expect(try await app.queuedPushes().count == tokens.count)

            // Past the dead worker's lease (real time; with its 120 s timeout, PushSettings.lease is
            // 81 minutes), another worker sends them all.
            // A minute for each push, not the helper's 10 s: in one full make test one push was
            // left queued, probably one that outlasted its timeout on the loaded machine (a failed
            // send is put off 45-75 s, past this run's end). The message says what was left.
            app.clock.advance(by: 3 * 3600)
            try await app.sendPushes(fake, timeout: 60)
            #expect(fake.received.map(\.token).sorted() == tokens.sorted())
            let left = try await app.queuedPushes()
            #expect(left.isEmpty, "still queued: \(left)")
        }
    }

    /// A job whose payload is not a push (written by hand, or by another version) is dropped,
    /// and the pushes claimed beside it go out: it used to fail its whole batch, again and again,
    /// and every logout meanwhile.
    @Test func aPushThatCannotBeReadIsDroppedAndTheRestGoOut() async throws {
        try await withPushApp { app, fake in
            let token = FakePushProvider.apnsToken()
            let owner = try await app.registerTrader()
            #expect(try await app.registerDevice(owner.token, token: token).status == .created)
            for payload in [#"{"device": "not a uuid", "title": 3}"#, #"{"provider": "apns"}"#, "[]"] {
                try await app.db.query("INSERT INTO jobs (kind, key, run_at, payload) VALUES ('push', \(UUID().uuidString), '-infinity', \(payload)::jsonb)")
            }
            let trade = try await app.trade(try await app.registerTrader().token, copy: try await app.copyID(owner.token))
            let stats = try await app.bookworm(["push", "stats"], extra: fake.environment)
            #expect(stats.status == 0 && stats.output.contains("(unreadable)"), "\(stats.output)")
            // While they wait, a device can still go (its pushes are found by text, not a uuid cast).
            let other = try await app.registerTrader()
            #expect(try await app.registerDevice(other.token, token: FakePushProvider.apnsToken()).status == .created)
            #expect(try await app.request(.post, "/v1/auth/logout", token: other.token).status == .noContent)
            try await app.sendPushes(fake)
            #expect(fake.received.map(\.id) == [trade])
            #expect(try await app.queuedPushes().isEmpty)
        }
    }

    /// API and workers configured apart: a worker without APNs leaves an APNs push queued for a
    /// worker that has it, instead of dropping it.
    @Test func aWorkerWithoutTheProviderLeavesThePushForOneThatHasIt() async throws {
        try await withPushApp { app, fake in
            let owner = try await app.registerTrader()
            #expect(try await app.registerDevice(owner.token, token: FakePushProvider.apnsToken()).status == .created)
            let trade = try await app.trade(try await app.registerTrader().token, copy: try await app.copyID(owner.token))
            var config = Config.forTests(app.settings)
            config.clock = app.clock
            config.push = try fake.settings()
            config.push.apns = nil
            let fcmOnly = try #require(try pushWorker(client: app.db, config: config, logger: Logger(label: "test-push")))
            do {
                while try await fcmOnly.runner.runDue() > 0 {}
            } catch {
                try? await fcmOnly.transport.shutdown()
                throw error
            }
            try await fcmOnly.transport.shutdown()
            #expect(fake.received.isEmpty)
            #expect(try await app.queuedPushes().map(\.attempts) == [1])
            app.clock.advance(by: 601)
            try await app.sendPushes(fake)
            #expect(fake.received.map(\.id) == [trade])
        }
    }

    /// A `bookworm worker` counts what became of its pushes on its `/metrics`: here one sent, one
    /// to a gone phone, one it has no provider for (FCM is not configured on it), one unreadable.
    @Test func theWorkerCountsPushesByProviderAndResult() async throws {
        try await withPushApp { app, fake in
            let gone = FakePushProvider.apnsToken()
            fake.script(gone, [.status(410, reason: "Unregistered")])
            for token in [FakePushProvider.apnsToken(), gone] { _ = try await requestedTradeForMetrics(app, token: token) }
            let owner = try await app.registerTrader()
            #expect(try await app.registerDevice(owner.token, platform: "fcm", token: FakePushProvider.fcmToken()).status == .created)
            _ = try await app.trade(try await app.registerTrader().token, copy: try await app.copyID(owner.token))
            try await app.db.query("INSERT INTO jobs (kind, key, run_at, payload) VALUES ('push', \(UUID().uuidString), '-infinity', '[]'::jsonb)")
            let metricsPort = try ServerProcess.freePort()
            var environment = bookwormEnvironment(fake.environment.merging([
                "DATABASE_URL": app.settings.connectionURL, "BOOKWORM_METRICS_PORT": String(metricsPort),
            ]) { $1 })
            environment["FCM_SERVICE_ACCOUNT_FILE"] = nil
            let pid = try ChildProcess.spawn(try bookwormBinary(), ["worker"], environment: environment)
            defer {
                kill(pid, SIGTERM)
                ChildProcess.wait(pid)
            }
            var text = ""
            let counted = try await eventually(within: 60) {
                text = (try? rawRequest(port: metricsPort, "GET", "/metrics").body) ?? ""
                return MetricsTests.sample(text, "bookworm_push_sent_total", ["provider=\"apns\"", "result=\"sent\""]) == 1
                    && MetricsTests.sample(text, "bookworm_push_sent_total", ["provider=\"apns\"", "result=\"gone\""]) == 1
                    && MetricsTests.sample(text, "bookworm_push_sent_total", ["provider=\"fcm\"", "result=\"unconfigured\""]) == 1
                    && MetricsTests.sample(text, "bookworm_push_sent_total", ["provider=\"unknown\"", "result=\"unreadable\""]) == 1
            }
            #expect(counted, "\(text.prefix(3000))")
        }
    }

    private func requestedTradeForMetrics(_ app: TestApp, token: String) async throws -> String {
        let owner = try await app.registerTrader()
        #expect(try await app.registerDevice(owner.token, token: token).status == .created)
        return try await app.trade(try await app.registerTrader().token, copy: try await app.copyID(owner.token))
    }

    @Test func theOperatorSeesTheQueueAndSendsATestPush() async throws {
        try await withPushApp { app, fake in
            let me = try await app.registerTrader()
            let token = FakePushProvider.fcmToken()
            #expect(try await app.registerDevice(me.token, platform: "fcm", token: token).status == .created)
            fake.script(token, [.status(503, reason: "UNAVAILABLE")])
            _ = try await app.trade(try await app.registerTrader().token, copy: try await app.copyID(me.token))
            try await app.sendPushes(fake)
            let stats = try await app.bookworm(["push", "stats"], extra: fake.environment)
            #expect(stats.status == 0)
            #expect(stats.output.contains("fcm") && stats.output.contains("retrying") && stats.output.contains("devices: fcm 1"))

            let test = try await app.bookworm(["push", "test", me.username], extra: fake.environment)
            #expect(test.status == 0)
            #expect(test.output.contains("1 of 1 test pushes"))
            // The command sends whatever else is due too (here the trade's push, due again on the real clock).
            #expect(fake.received.filter { $0.kind == "test" }.count == 1)
            let off = try await app.bookworm(["push", "test", me.username])
            #expect(off.output.contains("Push is off"))
        }
    }

    @Test func aNewWishAlertAndALoanReminderPushToo() async throws {
        try await withPushApp { app, fake in
            let wisher = try await app.wisher()
            let token = FakePushProvider.apnsToken()
            #expect(try await app.registerDevice(wisher.token, token: token).status == .created)
            let owner = try await app.wisher(at: 52.53, 13.41)
            let book = try await app.book(owner.token, title: "Dune", authors: ["Frank Herbert"])
            #expect(try await app.wish(wisher.token, book: book).status == .created)
            _ = try await app.offer(owner.token, title: "Dune", authors: ["Frank Herbert"])
            // A loan to the wisher, due in two days: a reminder the day before.
            let lent = try await app.copyID(owner.token, title: "Emma")
            let loan = try #require(try await app.requestTrade(wisher.token, copy: lent, kind: "loan", dueOn: app.day(after: 2))
                .jsonObject()["id"] as? String)
            #expect(try await app.act("accept", loan, owner.token).status == .ok)
            for side in [owner.token, wisher.token] { #expect(try await app.act("confirm", loan, side).status == .ok) }
            var config = Config.forTests(app.settings)
            config.clock = app.clock
            config.push = try fake.settings()
            let jobs = backgroundJobs(client: app.db, config: config, logger: Logger(label: "test-jobs"))
            try await jobs.prepare()
            while try await jobs.runDue() > 0 {}
            app.clock.advance(by: 86400 + 3600)
            while try await jobs.runDue() > 0 {}
            try await app.sendPushes(fake)
            let mine = fake.received.filter { $0.token == token }
            #expect(mine.contains { $0.kind == "alert" && $0.title == "\"Dune\" is available near you" && $0.body.contains("km away") })
            #expect(mine.contains { $0.kind == "trade" && $0.id == loan && $0.title.contains("is due on") })
        }
    }
}
