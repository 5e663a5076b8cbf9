import FakePush
import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import Accounts
@testable import BookwormCore
@testable import Exchange
@testable import BookwormTestSupport

/// One budget for every mail a person makes the service send someone else: trade requests,
/// counters, cancels, declines and contact, per (sender, recipient) a day and per sender an hour.
@Suite struct NotifyBudgetTests {
    func count(_ app: TestApp, _ sql: PostgresQuery) async throws -> Int {
        for try await count in try await app.db.query(sql).decode(Int.self) { return count }
        return 0
    }

    /// Trade mails queued for `email`.
    func tradeMails(_ app: TestApp, to email: String) async throws -> Int {
        try await app.tradeMails().filter { $0.to == email }.count
    }

    @Test func fiftyRequestCancelCyclesMailTheOwnerAtMostTheBudgetAndTheRequestPastItIs429() async throws {
        try await withSink { sink in
            try await withApp { app in
                let owner = try await app.registerVerified(sink)
                let requester = try await app.registerVerified(sink)
                let copy = try await app.copyID(owner.token, title: "Bait")
                var refused: [TestResponse] = []
                for _ in 0..<50 {
                    let request = try await app.requestTrade(requester.token, copy: copy)
                    guard request.status == .created else {
                        refused.append(request)
                        continue
                    }
                    let trade = try #require(try request.jsonObject()["id"] as? String)
                    #expect(try await app.act("cancel", trade, requester.token).status == .ok)
                }
                // Five requests and their five cancels spend the default 10; the rest create nothing.
                #expect(refused.count == 45)
                let first = try #require(refused.first)
                #expect(first.status == .tooManyRequests && first.isProblem)
                #expect(Int(first.headers[.retryAfter] ?? "") ?? 0 > 80_000, "a day's window: \(first.headers)")
                #expect(try await count(app, "SELECT count(*)::int8 FROM trades") == 5)

                try await app.deliver(to: sink)
                let mails = sink.messages().filter {
                    $0.envelopeTo == owner.email && $0.decodedHeader("Subject")?.contains(requester.username) == true
                }
                #expect(mails.count == 10)

                // The window slides: a day later the requester may ask again.
                app.clock.advance(by: 86401)
                #expect(try await app.requestTrade(requester.token, copy: copy).status == .created)
            }
        }
    }

    /// Pushes ride on the same notices: past the budget, a cancel buzzes no phone either.
    @Test func cancelsPastTheBudgetBuzzNoPhone() async throws {
        try await withPushApp { app, fake in
            let owner = try await app.registerTrader(), requester = try await app.registerTrader()
            let phone = FakePushProvider.apnsToken()
            #expect(try await app.registerDevice(owner.token, token: phone).status == .created)
            var trades: [String] = []
            for index in 0..<10 { trades.append(try await app.trade(requester.token, copy: try await app.copyID(owner.token, title: "Book \(index)"))) }
            for trade in trades.prefix(5) { #expect(try await app.act("cancel", trade, requester.token).status == .ok) }
            try await app.sendPushes(fake)
            #expect(fake.attempts(phone) == 10)
            #expect(Set(fake.received.map(\.id)) == Set(trades))
        }
    }

    @Test func aCancelPastTheBudgetStillCancelsWithoutAMail() async throws {
        try await withApp { app in
            let owner = try await app.registerTrader(), requester = try await app.registerTrader()
            var trades: [String] = []
            for index in 0..<10 { trades.append(try await app.trade(requester.token, copy: try await app.copyID(owner.token, title: "Book \(index)"))) }
            #expect(try await tradeMails(app, to: owner.email) == 10)
            let extra = try await app.copyID(owner.token, title: "One more")
            #expect(try await app.requestTrade(requester.token, copy: extra).status == .tooManyRequests)

            #expect(try await app.act("cancel", trades[0], requester.token).status == .ok)
            #expect(try await app.tradeState(trades[0]) == "cancelled")
            #expect(try await tradeMails(app, to: owner.email) == 10)
            // The owner's own budget toward the requester is untouched: their decline is mailed.
            #expect(try await app.act("decline", trades[1], owner.token).status == .ok)
            #expect(try await app.tradeState(trades[1]) == "declined")
            #expect(try await tradeMails(app, to: requester.email) == 1)
        }
    }

    /// Twenty requests at once for twenty copies of one owner: the budget's check and count run
    /// under the sender's advisory lock, so exactly ten pass. Without it, two that overlap both
    /// read nine and eleven or more pass (in about half the rounds, so five rounds).
    @Test func parallelRequestsCannotExceedTheBudget() async throws {
        try await withApp { app in
            let owner = try await app.registerTrader()
            var copies: [String] = []
            for index in 0..<20 { copies.append(try await app.copyID(owner.token, title: "Book \(index)")) }
            for round in 0..<5 {
                let requester = try await app.registerTrader()
                let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                    for copy in copies { group.addTask { try await app.requestTrade(requester.token, copy: copy).status } }
                    return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
                }
                #expect(statuses.filter { $0 == .created }.count == 10, "round \(round): \(statuses)")
                #expect(statuses.filter { $0 == .tooManyRequests }.count == 10, "round \(round): \(statuses)")
                let id = UUID(uuidString: requester.id)
                #expect(try await count(app, "SELECT count(*)::int8 FROM trades WHERE requester_id = \(id)") == 10, "round \(round)")
            }
            #expect(try await tradeMails(app, to: owner.email) == 50)
        }
    }

    @Test func contactAndTradesDrawOnOneBudget() async throws {
        try await withApp(configure: { $0.notify = NotifyPolicy(perRecipientPerDay: 4, perSenderPerHour: 30) }) { app in
            let owner = try await app.registerTrader(), sender = try await app.registerTrader()
            for index in 0..<3 { _ = try await app.trade(sender.token, copy: try await app.copyID(owner.token, title: "Book \(index)")) }
            func contact() async throws -> TestResponse {
                try await app.request(.post, "/v1/contact", json: ["to_username": owner.username, "message": "hi \(UUID())", "share_email": false],
                                      token: sender.token)
            }
            // Contact's own limit (3 per recipient a day) is not reached: the shared budget refuses.
            #expect(try await contact().status == .accepted)
            let refused = try await contact()
            #expect(refused.status == .tooManyRequests && Int(refused.headers[.retryAfter] ?? "") ?? 0 > 80_000)
            let copy = try await app.copyID(owner.token, title: "Another")
            #expect(try await app.requestTrade(sender.token, copy: copy).status == .tooManyRequests)
            #expect(try await count(app, "SELECT count(*)::int8 FROM contact_requests") == 1)
            #expect(try await count(app, "SELECT count(*)::int8 FROM outbox_messages WHERE kind IN ('trade', 'contact')") == 4)
        }
    }

    @Test func oneSenderIsLimitedPerHourAcrossAllRecipients() async throws {
        try await withApp(configure: { $0.notify = NotifyPolicy(perRecipientPerDay: 10, perSenderPerHour: 3) }) { app in
            let sender = try await app.registerTrader()
            var copies: [String] = []
            for index in 0..<4 { copies.append(try await app.copyID(try await app.registerTrader().token, title: "Book \(index)")) }
            for copy in copies.prefix(3) { #expect(try await app.requestTrade(sender.token, copy: copy).status == .created) }
            let refused = try await app.requestTrade(sender.token, copy: copies[3])
            #expect(refused.status == .tooManyRequests)
            #expect((1...3600).contains(Int(refused.headers[.retryAfter] ?? "") ?? 0), "\(refused.headers)")
            app.clock.advance(by: 3601)
            #expect(try await app.requestTrade(sender.token, copy: copies[3]).status == .created)
        }
    }
}
