import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import Accounts
@testable import BookwormCore
@testable import Exchange
@testable import BookwormTestSupport

/// Races closed in the database: copy row locks in a fixed order and one reservation row per copy.
@Suite struct TradeRacesTests {
    func reservations(_ app: TestApp, copy: String) async throws -> Int {
        for try await count in try await app.db.query("""
            SELECT count(*)::int8 FROM copy_reservations WHERE copy_id = \(UUID(uuidString: copy))
            """).decode(Int.self) { return count }
        return 0
    }

    @Test func twentyRequestsThenTwoConcurrentAcceptsLeaveExactlyOneAccepted() async throws {
        try await withApp { app in
            let owner = try await app.registerTrader()
            var requesters: [TestApp.Account] = []
            for _ in 0..<20 { requesters.append(try await app.registerTrader()) }
            for round in 0..<3 {
                let copy = try await app.copyID(owner.token, title: "Round \(round)")
                let trades = try await withThrowingTaskGroup(of: String.self) { group in
                    for requester in requesters { group.addTask { try await app.trade(requester.token, copy: copy) } }
                    return try await group.reduce(into: [String]()) { $0.append($1) }
                }
                #expect(trades.count == 20)
                async let first = app.act("accept", trades[0], owner.token)
                async let second = app.act("accept", trades[1], owner.token)
                let statuses = [try await first.status, try await second.status]
                #expect(statuses.filter { $0 == .ok }.count == 1, "round \(round): \(statuses)")
                #expect(statuses.filter { $0 == .conflict }.count == 1, "round \(round): \(statuses)")
                var states: [String: Int] = [:]
                for trade in trades { states[try await app.tradeState(trade), default: 0] += 1 }
                #expect(states == ["accepted": 1, "declined": 19], "round \(round)")
                #expect(try await app.copyRow(copy).status == "reserved")
                #expect(try await reservations(app, copy: copy) == 1)
                let reasons = try await app.db.query("""
                    SELECT count(*)::int8 FROM trades WHERE copy_id = \(UUID(uuidString: copy)) AND decline_reason = 'reserved'
                    """).decode(Int.self)
                for try await count in reasons { #expect(count == 19) }
            }
            // Each declined requester was told.
            #expect(try await app.tradeMails().filter { $0.subject.contains("no longer available") }.count == 57)
        }
    }

    @Test func anAcceptRacingACancelNeverStrandsAReservedCopy() async throws {
        // Ten rounds between one pair: the notify budget (NotifyBudgetTests) is not what this is about.
        try await withApp(configure: { $0.notify = NotifyPolicy(perRecipientPerDay: 10_000, perSenderPerHour: 10_000) }) { app in
            let owner = try await app.registerTrader(), requester = try await app.registerTrader()
            for round in 0..<10 {
                let copy = try await app.copyID(owner.token, title: "Round \(round)")
                let trade = try await app.trade(requester.token, copy: copy)
                async let accept = app.act("accept", trade, owner.token)
                async let cancel = app.act("cancel", trade, requester.token)
                let (accepted, cancelled) = (try await accept.status, try await cancel.status)
                // The cancel always wins or comes second: either way it ends cancelled and the copy is free.
                #expect(cancelled == .ok, "round \(round)")
                #expect(accepted == .ok || accepted == .conflict)
                #expect(try await app.tradeState(trade) == "cancelled")
                #expect(try await app.copyRow(copy).status == "available")
                #expect(try await reservations(app, copy: copy) == 0)
            }
        }
    }

    @Test func aCopyInAnOpenTradeCannotBeDeletedWhileItIsAccepted() async throws {
        try await withApp { app in
            let owner = try await app.registerTrader(), requester = try await app.registerTrader()
            for round in 0..<5 {
                let copy = try await app.copyID(owner.token, title: "Round \(round)")
                let trade = try await app.trade(requester.token, copy: copy)
                async let accept = app.act("accept", trade, owner.token)
                async let delete = app.request(.delete, "/v1/copies/\(copy)", token: owner.token)
                let (accepted, deleted) = (try await accept.status, try await delete.status)
                #expect(deleted == .conflict && accepted == .ok, "round \(round): \(deleted) \(accepted)")
                #expect(try await app.copyRow(copy).status == "reserved")
            }
            // Once no trade is open, the copy can go; the trade keeps its book.
            let copy = try await app.copyID(owner.token, title: "Gone")
            let trade = try await app.trade(requester.token, copy: copy)
            #expect(try await app.act("decline", trade, owner.token).status == .ok)
            #expect(try await app.request(.delete, "/v1/copies/\(copy)", token: owner.token).status == .noContent)
            let view = try await app.request(.get, "/v1/trades/\(trade)", token: requester.token).jsonObject()
            let shown = view["copy"] as? [String: Any]
            #expect(shown?["id"] is NSNull && (shown?["book"] as? [String: Any])?["title"] as? String == "Gone")
        }
    }

    @Test func aSwapWhoseCopiesAreBothRequestedElsewhereReservesBothOrNeither() async throws {
        try await withApp { app in
            let alice = try await app.registerTrader(), bob = try await app.registerTrader()
            let carol = try await app.registerTrader(), dave = try await app.registerTrader()
            for round in 0..<5 {
                let wanted = try await app.copyID(alice.token, title: "Wanted \(round)")
                let offered = try await app.copyID(bob.token, title: "Offered \(round)")
                let swap = try await app.trade(bob.token, copy: wanted, kind: "swap", offered: offered)
                let carolsAsk = try await app.trade(carol.token, copy: wanted)
                let davesAsk = try await app.trade(dave.token, copy: offered, kind: "loan")
                // Alice accepts the swap while Bob lends the offered copy to Dave.
                async let swapAccept = app.act("accept", swap, alice.token)
                async let loanAccept = app.act("accept", davesAsk, bob.token)
                let (swapStatus, loanStatus) = (try await swapAccept.status, try await loanAccept.status)
                #expect([swapStatus, loanStatus].filter { $0 == .ok }.count == 1, "round \(round): \(swapStatus) \(loanStatus)")
                let states = [try await app.tradeState(swap), try await app.tradeState(carolsAsk), try await app.tradeState(davesAsk)]
                let statuses = [try await app.copyRow(wanted).status, try await app.copyRow(offered).status]
                if swapStatus == .ok {
                    #expect(states == ["accepted", "declined", "declined"])
                    #expect(statuses == ["reserved", "reserved"])
                } else {
                    #expect(states == ["declined", "requested", "accepted"])
                    #expect(statuses == ["available", "reserved"])
                }
            }
        }
    }
}
