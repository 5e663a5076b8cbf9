import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Exchange
@testable import BookwormTestSupport

/// Who may ask for what, what a request body may say, and what trades do to the rest of the service.
@Suite struct TradeRulesTests {
    @Test func badRequestBodiesNameTheField() async throws {
        try await withApp { app in
            let owner = try await app.registerTrader(), requester = try await app.registerTrader()
            let copy = try await app.copyID(owner.token)
            let mine = try await app.copyID(requester.token)
            let cases: [([String: any Sendable], HTTPResponse.Status, String)] = [
                (["copy_id": copy, "kind": "rent"], .badRequest, "kind"),
                (["copy_id": copy, "kind": "gift", "message": String(repeating: "a", count: 1001)], .badRequest, "message"),
                (["copy_id": copy, "kind": "loan", "due_on": "26-1-1"], .badRequest, "due_on"),
                (["copy_id": copy, "kind": "loan", "due_on": "2026-13-01"], .unprocessableContent, "due_on"),
                (["copy_id": copy, "kind": "gift", "colour": "red"], .badRequest, "colour"),
                (["copy_id": "not-a-uuid", "kind": "gift"], .badRequest, "copy_id"),
                (["copy_id": copy, "kind": "loan"], .unprocessableContent, "due_on"),
                (["copy_id": copy, "kind": "loan", "due_on": app.day(after: 366)], .unprocessableContent, "due_on"),
                (["copy_id": copy, "kind": "loan", "due_on": app.day(after: 0)], .unprocessableContent, "due_on"),
                (["copy_id": copy, "kind": "gift", "due_on": app.day(after: 3)], .unprocessableContent, "due_on"),
                (["copy_id": copy, "kind": "swap"], .unprocessableContent, "offered_copy_id"),
                (["copy_id": copy, "kind": "gift", "offered_copy_id": mine], .unprocessableContent, "offered_copy_id"),
                (["copy_id": copy, "kind": "swap", "offered_copy_id": copy], .unprocessableContent, "offered_copy_id"),
                (["copy_id": mine, "kind": "gift"], .unprocessableContent, "copy_id"),
            ]
            for (body, status, field) in cases {
                let response = try await app.request(.post, "/v1/trades", json: body, token: requester.token)
                #expect(response.status == status, "\(body)")
                #expect(response.isProblem)
                let named = try response.problemFields() + [String(buffer: response.body)]
                #expect(named.contains { $0.contains(field) }, "\(body): \(String(buffer: response.body))")
            }
            #expect(try await app.requestTrade(requester.token, copy: copy, kind: "loan", dueOn: app.day(after: 365)).status == .created)
            let count = try await app.db.query("SELECT count(*)::int8 FROM trades").decode(Int.self)
            for try await trades in count { #expect(trades == 1) }
        }
    }

    @Test func onlyAVerifiedUnblockedStrangerWithoutAnOpenRequestMayAsk() async throws {
        try await withApp { app in
            let owner = try await app.registerTrader(), requester = try await app.registerTrader()
            let unverified = try await app.register(from: "10.9.9.9")
            let copy = try await app.copyID(owner.token)
            let notVerified = try await app.requestTrade(unverified.token, copy: copy)
            #expect(notVerified.status == .forbidden)
            #expect(try notVerified.jsonObject()["type"] as? String == "https://bookworm.example/problems/email_not_verified")
            #expect(try await app.requestTrade(requester.token, copy: UUID().uuidString).status == .notFound)

            let first = try await app.requestTrade(requester.token, copy: copy)
            #expect(first.status == .created)
            let twice = try await app.requestTrade(requester.token, copy: copy, kind: "loan")
            #expect(twice.status == .conflict)
            #expect(try twice.jsonObject()["type"] as? String == "https://bookworm.example/problems/trade_exists")
            #expect(try await app.act("cancel", try first.jsonObject()["id"] as? String ?? "", requester.token).status == .ok)
            #expect(try await app.requestTrade(requester.token, copy: copy).status == .created)

            let someoneElse = try await app.registerTrader()
            let offeredByOther = try await app.copyID(someoneElse.token)
            let notMine = try await app.requestTrade(requester.token, copy: try await app.copyID(owner.token), kind: "swap", offered: offeredByOther)
            #expect(notMine.status == .unprocessableContent)

            #expect(try await app.request(.put, "/v1/users/\(requester.username)/block", token: owner.token).status == .noContent)
            let blocked = try await app.requestTrade(requester.token, copy: try await app.copyID(owner.token))
            #expect(blocked.status == .forbidden)
            let blocking = try await app.requestTrade(owner.token, copy: try await app.copyID(requester.token))
            #expect(blocking.status == .forbidden)
        }
    }

    @Test func blockingCancelsOpenTradesAndFreesTheirCopies() async throws {
        try await withApp { app in
            let owner = try await app.registerTrader(), requester = try await app.registerTrader(), other = try await app.registerTrader()
            let reserved = try await app.copyID(owner.token), asked = try await app.copyID(owner.token)
            let accepted = try await app.trade(requester.token, copy: reserved)
            #expect(try await app.act("accept", accepted, owner.token).status == .ok)
            let requested = try await app.trade(requester.token, copy: asked)
            let unrelated = try await app.trade(other.token, copy: asked)
            #expect(try await app.request(.put, "/v1/users/\(owner.username)/block", token: requester.token).status == .noContent)
            #expect(try await app.tradeState(accepted) == "cancelled")
            #expect(try await app.tradeState(requested) == "cancelled")
            #expect(try await app.tradeState(unrelated) == "requested")
            #expect(try await app.copyRow(reserved).status == "available")
        }
    }

    @Test func reservedCopiesLeaveNearbyAndTheLibraryWhileRequestedOnesStay() async throws {
        try await withApp { app in
            let owner = try await app.registerTrader(), requester = try await app.registerTrader()
            try await app.addPin(owner.token, latitude: 48.85, longitude: 2.35)
            let reserved = try await app.copyID(owner.token, title: "Reserved"), asked = try await app.copyID(owner.token, title: "Asked")
            #expect(try await app.act("accept", try await app.trade(requester.token, copy: reserved), owner.token).status == .ok)
            _ = try await app.trade(requester.token, copy: asked)
            let library = try await app.page("/v1/copies?limit=100").ids
            #expect(library.contains(asked) && !library.contains(reserved))
            let nearby = try await app.request(.get, "/v1/nearby/copies?latitude=48.85&longitude=2.35&radius_km=5&limit=100",
                                               token: requester.token).jsonObject()["data"] as? [[String: Any]] ?? []
            let ids = nearby.compactMap { $0["id"] as? String }
            #expect(ids.contains(asked) && !ids.contains(reserved))
        }
    }

    @Test func tradesAloneReserveAndLendAndACopyInATradeStays() async throws {
        try await withApp { app in
            let owner = try await app.registerTrader(), requester = try await app.registerTrader()
            let free = try await app.copyID(owner.token), asked = try await app.copyID(owner.token)
            for status in ["reserved", "lent"] {
                let response = try await app.request(.patch, "/v1/copies/\(free)", json: ["status": status], token: owner.token)
                #expect(response.status == .conflict, "\(status)")
            }
            let trade = try await app.trade(requester.token, copy: asked)
            #expect(try await app.request(.patch, "/v1/copies/\(asked)", json: ["status": "withdrawn"], token: owner.token).status == .conflict)
            #expect(try await app.request(.delete, "/v1/copies/\(asked)", token: owner.token).status == .conflict)
            #expect(try await app.request(.patch, "/v1/copies/\(asked)", json: ["notes": "Signed"], token: owner.token).status == .ok)
            #expect(try await app.act("accept", trade, owner.token).status == .ok)
            #expect(try await app.request(.patch, "/v1/copies/\(asked)", json: ["status": "available"], token: owner.token).status == .conflict)
            #expect(try await app.copyRow(asked).status == "reserved")
            #expect(try await app.request(.patch, "/v1/copies/\(free)", json: ["status": "withdrawn"], token: owner.token).status == .ok)
        }
    }

    @Test func ratingsComeOnlyAfterCompletionOncePerSideWithinThirtyDays() async throws {
        try await withApp { app in
            let owner = try await app.registerTrader(), requester = try await app.registerTrader()
            let trade = try await app.trade(requester.token, copy: try await app.copyID(owner.token))
            #expect(try await app.act("rating", trade, requester.token, json: ["score": 5]).status == .conflict)
            for (action, token) in [("accept", owner.token), ("confirm", owner.token)] {
                #expect(try await app.act(action, trade, token).status == .ok)
            }
            #expect(try await app.act("rating", trade, requester.token, json: ["score": 5]).status == .conflict)
            #expect(try await app.act("confirm", trade, requester.token).status == .ok)
            for bad: [String: any Sendable] in [["score": 0], ["score": 6], ["score": 4.5], ["score": 3, "comment": String(repeating: "x", count: 501)]] {
                #expect(try await app.act("rating", trade, requester.token, json: bad).status == .badRequest, "\(bad)")
            }
            #expect(try await app.act("rating", trade, requester.token, json: ["score": 2, "comment": "Late"]).status == .created)
            #expect(try await app.act("rating", trade, requester.token, json: ["score": 5]).status == .conflict)
            app.clock.advance(by: 30 * 86400 + 1)
            // The old session went idle meanwhile: sign in again.
            let login = try await app.request(.post, "/v1/auth/login", json: ["login": owner.username, "password": owner.password])
            let token = try #require(try login.jsonObject()["token"] as? String)
            let late = try await app.act("rating", trade, token, json: ["score": 5])
            #expect(late.status == .conflict)
            #expect(try late.jsonObject()["type"] as? String == "https://bookworm.example/problems/rating_closed")
            let profile = try await app.request(.get, "/v1/users/\(owner.username)").jsonObject()
            #expect((profile["rating"] as? [String: Any])?["average"] as? Double == 2)
            let unrated = try await app.request(.get, "/v1/users/\(requester.username)").jsonObject()
            #expect((unrated["rating"] as? [String: Any])?["average"] is NSNull)
            #expect(unrated["completed_trades"] as? Int == 1)
        }
    }

    @Test func myTradesShowWhatWaitsForMeFirstAndPageWithoutRepeats() async throws {
        try await withApp { app in
            let me = try await app.registerTrader(), other = try await app.registerTrader()
            var incoming: [String] = [], outgoing: [String] = []
            for index in 0..<4 {
                incoming.append(try await app.trade(other.token, copy: try await app.copyID(me.token, title: "Mine \(index)")))
                app.clock.advance(by: 1)
                outgoing.append(try await app.trade(me.token, copy: try await app.copyID(other.token, title: "Theirs \(index)")))
                app.clock.advance(by: 1)
            }
            // Waiting for me: the requests for my copies (newest first); then my own requests.
            var seen: [String] = []
            var cursor: String?
            repeat {
                let body = try await app.request(.get, "/v1/me/trades?limit=3" + (cursor.map { "&cursor=\($0)" } ?? ""), token: me.token).jsonObject()
                seen += (body["data"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
                cursor = body["next_cursor"] as? String
            } while cursor != nil
            #expect(seen == incoming.reversed() + outgoing.reversed())
            let outgoingOnly = try await app.request(.get, "/v1/me/trades?role=outgoing", token: me.token).jsonObject()
            #expect((outgoingOnly["data"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == outgoing.reversed())
            #expect(try await app.act("cancel", outgoing[0], me.token).status == .ok)
            let cancelled = try await app.request(.get, "/v1/me/trades?state=cancelled", token: me.token).jsonObject()
            #expect((cancelled["data"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [outgoing[0]])
            // Every 32-character cursor decodes, however far outside time it points.
            for odd in [String(repeating: "0", count: 32), String(repeating: "_", count: 32), String(repeating: "A", count: 32)] {
                #expect(try await app.request(.get, "/v1/me/trades?role=incoming&cursor=\(odd)", token: me.token).status == .ok, "\(odd)")
            }
            for bad in ["role=mine", "state=lost", "cursor=abc", "limit=0"] {
                #expect(try await app.request(.get, "/v1/me/trades?\(bad)", token: me.token).status == .badRequest, "\(bad)")
            }
        }
    }
}
