import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Exchange
@testable import BookwormTestSupport

/// Expiry and reminders: the recurring job on the injected clock, which the tests move.
@Suite struct TradeTimeTests {
    static let day: TimeInterval = 86400

    @Test func requestsExpireAfterFourteenDaysAndAcceptedOnesAfterFourteenQuietDays() async throws {
        try await withApp { app in
            let owner = try await app.registerTrader(), requester = try await app.registerTrader()
            let quiet = try await app.trade(requester.token, copy: try await app.copyID(owner.token))
            let copy = try await app.copyID(owner.token)
            let accepted = try await app.trade(requester.token, copy: copy)
            #expect(try await app.act("accept", accepted, owner.token).status == .ok)

            app.clock.advance(by: 10 * Self.day)
            try await app.runJobs()
            #expect(try await app.tradeState(quiet) == "requested")
            // Activity restarts the accepted trade's window.
            #expect(try await app.act("confirm", accepted, requester.token).status == .ok)

            app.clock.advance(by: 4 * Self.day + 60)
            try await app.runJobs()
            #expect(try await app.tradeState(quiet) == "expired")
            #expect(try await app.tradeState(accepted) == "accepted")

            app.clock.advance(by: 10 * Self.day + 60)
            try await app.runJobs()
            #expect(try await app.tradeState(accepted) == "expired")
            #expect(try await app.copyRow(copy).status == "available")
            let expiredMails = try await app.tradeMails().filter { $0.subject.hasPrefix("Trade expired") }
            #expect(Set(expiredMails.map(\.to)) == [owner.email, requester.email])
            #expect(expiredMails.count == 4)
            let events = try await app.request(.get, "/v1/trades/\(quiet)", token: owner.token).jsonObject()["events"] as? [[String: Any]]
            #expect(events?.last?["action"] as? String == "expire" && events?.last?["by"] is NSNull)
        }
    }

    @Test func theExpiryWindowsAreConfigurable() async throws {
        let policy = { var policy = TradePolicy(); policy.requestedDays = 2; return policy }()
        try await withApp(configure: { $0.trades.requestedDays = 2 }) { app in
            let owner = try await app.registerTrader(), requester = try await app.registerTrader()
            let trade = try await app.trade(requester.token, copy: try await app.copyID(owner.token))
            let expires = try await app.request(.get, "/v1/trades/\(trade)", token: owner.token).jsonObject()["expires_at"] as? String
            #expect(expires != nil)
            app.clock.advance(by: 2 * Self.day + 60)
            let runner = app.jobRunner(policy: policy)
            try await runner.prepare()
            try await runner.runDue()
            #expect(try await app.tradeState(trade) == "expired")
        }
    }

    @Test func aBorrowerHearsTwoDaysBeforeTheDueDateAndOnceWhenOverdue() async throws {
        try await withApp { app in
            let owner = try await app.registerTrader(), borrower = try await app.registerTrader()
            let copy = try await app.copyID(owner.token, title: "Middlemarch")
            let response = try await app.requestTrade(borrower.token, copy: copy, kind: "loan", dueOn: app.day(after: 6))
            let loan = try #require(try response.jsonObject()["id"] as? String)
            for (action, token) in [("accept", owner.token), ("confirm", owner.token), ("confirm", borrower.token)] {
                #expect(try await app.act(action, loan, token).status == .ok)
            }
            func reminders() async throws -> [String] {
                try await app.tradeMails().filter { $0.to == borrower.email && $0.subject.contains("Middlemarch") && $0.subject.contains("due") }
                    .map(\.subject)
            }
            app.clock.advance(by: 3 * Self.day)
            try await app.runJobs()
            #expect(try await reminders().isEmpty)
            app.clock.advance(by: 1 * Self.day + 60)
            try await app.runJobs()
            #expect(try await reminders().count == 1)
            app.clock.advance(by: 120)
            try await app.runJobs()
            #expect(try await reminders().count == 1)
            app.clock.advance(by: 3 * Self.day)
            try await app.runJobs()
            #expect(try await reminders().count == 2)
            #expect(try await reminders().last?.contains("overdue") == true)
            app.clock.advance(by: 5 * Self.day)
            try await app.runJobs()
            #expect(try await reminders().count == 2)
            #expect(try await app.tradeMails().filter { $0.subject.contains("overdue") }.allSatisfy { $0.to == borrower.email })
        }
    }

    @Test func twoJobRunnersNeverRunTheSameJobAtOnce() async throws {
        try await withApp { app in
            // Away from the daily digest's hour, so the sweep is the only recurring job that
            // comes due in these five minutes whatever time of day the test runs.
            let noon = 12 * 3600.0, sinceMidnight = app.clock.now().timeIntervalSince1970.truncatingRemainder(dividingBy: 86400)
            app.clock.advance(by: (noon - sinceMidnight + 86400).truncatingRemainder(dividingBy: 86400))
            let first = app.jobRunner(), second = app.jobRunner()
            try await first.prepare()
            try await second.prepare()
            // What is due at once (the photo remake's first look) runs first, on one runner.
            _ = try await first.runDue()
            for _ in 0..<5 {
                app.clock.advance(by: 61)
                async let a = first.runDue()
                async let b = second.runDue()
                #expect(try await a + b == 1)
            }
            let rows = try await app.db.query("SELECT count(*)::int8 FROM jobs WHERE kind = 'trades.sweep'").decode(Int.self)
            for try await count in rows { #expect(count == 1) }
        }
    }
}
