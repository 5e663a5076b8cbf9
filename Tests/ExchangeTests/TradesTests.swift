import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Exchange
@testable import BookwormTestSupport

@Suite struct TradesTests {
    @Test func aLoanGoesFromRequestToReturnWithMailsRatingsAndAJourney() async throws {
        try await withSink { sink in
            try await withApp { app in
                let owner = try await app.registerVerified(sink)
                let borrower = try await app.registerVerified(sink)
                let copy = try await app.copyID(owner.token, title: "Der Zauberberg")
                let requested = try await app.requestTrade(borrower.token, copy: copy, kind: "loan", dueOn: app.day(after: 21),
                                                           message: "I would love to read it")
                #expect(requested.status == .created)
                let trade = try requested.jsonObject()
                let id = try #require(trade["id"] as? String)
                #expect(trade["state"] as? String == "requested")
                #expect(trade["actions"] as? [String] == ["cancel"])
                #expect(!String(buffer: requested.body).contains(owner.email))

                // The owner hears about it by mail, from the service, without the borrower's address.
                try await app.deliver(to: sink)
                let mail = try #require(sink.messages().last { $0.envelopeTo == owner.email })
                #expect(mail.decodedHeader("Subject")?.contains(borrower.username) == true)
                #expect(mail.body.contains("Der Zauberberg") && !mail.raw.contains(borrower.email))

                let mine = try await app.request(.get, "/v1/trades/\(id)", token: owner.token).jsonObject()
                #expect(mine["actions"] as? [String] == ["accept", "decline", "cancel"])
                #expect(mine["waiting"] as? Bool == true)
                #expect(try await app.act("accept", id, owner.token).status == .ok)
                #expect(try await app.copyRow(copy).status == "reserved")
                let library = try await app.page("/v1/copies?limit=100")
                #expect(!library.ids.contains(copy))

                #expect(try await app.act("confirm", id, borrower.token).status == .ok)
                #expect(try await app.tradeState(id) == "accepted")
                let completed = try await app.act("confirm", id, owner.token)
                #expect(try completed.jsonObject()["state"] as? String == "completed")
                #expect(try await app.copyRow(copy) == (owner.username, "lent"))
                #expect(try await app.act("return", id, borrower.token).status == .conflict)
                let returned = try await app.act("return", id, owner.token)
                #expect(try returned.jsonObject()["state"] as? String == "returned")
                #expect(try await app.copyRow(copy) == (owner.username, "available"))

                #expect(try await app.act("rating", id, owner.token, json: ["score": 5, "comment": "Careful reader"]).status == .created)
                #expect(try await app.act("rating", id, borrower.token, json: ["score": 4]).status == .created)
                let again = try await app.act("rating", id, borrower.token, json: ["score": 1])
                #expect(again.status == .conflict)
                let profile = try await app.request(.get, "/v1/users/\(owner.username)").jsonObject()
                #expect(profile["completed_trades"] as? Int == 1)
                #expect((profile["rating"] as? [String: Any])?["average"] as? Double == 4)
                #expect((profile["rating"] as? [String: Any])?["count"] as? Int == 1)

                // A loan changes no owner: the journey is the one listing.
                let journey = try await app.request(.get, "/v1/copies/\(copy)/journey").jsonObject()
                let steps = try #require(journey["data"] as? [[String: Any]])
                #expect(steps.map { $0["username"] as? String } == [owner.username])
                #expect(steps.first?["kind"] as? String == "listed")

                let events = try await app.request(.get, "/v1/trades/\(id)", token: borrower.token).jsonObject()["events"] as? [[String: Any]]
                #expect(events?.map { $0["action"] as? String } == ["request", "accept", "confirm", "confirm", "return"])
                try await app.deliver(to: sink)
                let borrowerMails = sink.messages().filter { $0.envelopeTo == borrower.email }.compactMap { $0.decodedHeader("Subject") }
                #expect(borrowerMails.contains { $0.contains("accepted") } && borrowerMails.contains { $0.contains("completed") })
            }
        }
    }

    @Test func aGiftThenASwapMakeTheCopysJourney() async throws {
        try await withApp { app in
            let first = try await app.registerTrader(), second = try await app.registerTrader(), third = try await app.registerTrader()
            let copy = try await app.copyID(first.token, title: "Kindred")
            let gift = try await app.trade(second.token, copy: copy)
            for (action, token) in [("accept", first.token), ("confirm", first.token), ("confirm", second.token)] {
                #expect(try await app.act(action, gift, token).status == .ok)
            }
            #expect(try await app.copyRow(copy) == (second.username, "available"))
            let offered = try await app.copyID(third.token, title: "Parable of the Sower")
            let swap = try await app.trade(third.token, copy: copy, kind: "swap", offered: offered)
            for (action, token) in [("accept", second.token), ("confirm", third.token), ("confirm", second.token)] {
                #expect(try await app.act(action, swap, token).status == .ok)
            }
            #expect(try await app.copyRow(copy) == (third.username, "available"))
            #expect(try await app.copyRow(offered) == (second.username, "available"))
            let steps = try #require(try await app.request(.get, "/v1/copies/\(copy)/journey").jsonObject()["data"] as? [[String: Any]])
            #expect(steps.map { $0["username"] as? String } == [first.username, second.username, third.username])
            #expect(steps.map { $0["kind"] as? String } == ["listed", "gift", "swap"])
            let offeredSteps = try await app.request(.get, "/v1/copies/\(offered)/journey").jsonObject()["data"] as? [[String: Any]]
            #expect(offeredSteps?.map { $0["username"] as? String } == [third.username, second.username])
            #expect(try await app.request(.get, "/v1/copies/\(UUID().uuidString)/journey").status == .notFound)
        }
    }

    @Test func countersAlternateAtMostTwicePerSideAndAcceptTakesTheLatest() async throws {
        try await withApp { app in
            let owner = try await app.registerTrader(), requester = try await app.registerTrader()
            let copy = try await app.copyID(owner.token)
            var offers: [String] = []
            for index in 0..<4 { offers.append(try await app.copyID(requester.token, title: "Offer \(index)")) }
            let trade = try await app.trade(requester.token, copy: copy, kind: "swap", offered: offers[0])
            func counter(_ token: String, _ offer: String) async throws -> TestResponse {
                try await app.act("counter", trade, token, json: ["offered_copy_id": offer])
            }
            // The requester made the latest proposal: only the owner may counter, accept or decline.
            let early = try await counter(requester.token, offers[1])
            #expect(early.status == .conflict)
            #expect(try early.jsonObject()["state"] as? String == "requested" && early.jsonObject()["action"] as? String == "counter")
            #expect(try await counter(owner.token, offers[1]).status == .ok)
            #expect(try await counter(owner.token, offers[2]).status == .conflict)
            #expect(try await app.act("accept", trade, owner.token).status == .conflict)
            #expect(try await counter(requester.token, offers[2]).status == .ok)
            #expect(try await counter(owner.token, offers[3]).status == .ok)
            #expect(try await counter(requester.token, offers[0]).status == .ok)
            let limit = try await counter(owner.token, offers[1])
            #expect(limit.status == .conflict)
            #expect(try limit.jsonObject()["type"] as? String == "https://bookworm.example/problems/counter_limit")
            // Someone else's copy is never a proposal.
            let foreign = try await counter(owner.token, copy)
            #expect(foreign.status == .conflict || foreign.status == .unprocessableContent)
            let accepted = try await app.act("accept", trade, owner.token).jsonObject()
            #expect((accepted["offered_copy"] as? [String: Any])?["id"] as? String == offers[0])
            #expect((accepted["counters"] as? [[String: Any]])?.count == 4)
            #expect(try await app.copyRow(offers[0]).status == "reserved")
            #expect(try await app.copyRow(offers[3]).status == "available")
        }
    }

    @Test func onlyParticipantsSeeOrTouchATrade() async throws {
        try await withApp { app in
            let owner = try await app.registerTrader(), requester = try await app.registerTrader(), stranger = try await app.registerTrader()
            let copy = try await app.copyID(owner.token)
            let trade = try await app.trade(requester.token, copy: copy)
            #expect(try await app.request(.get, "/v1/trades/\(trade)", token: stranger.token).status == .notFound)
            for action in ["accept", "decline", "cancel", "confirm", "return"] {
                #expect(try await app.act(action, trade, stranger.token).status == .notFound, "\(action)")
            }
            #expect(try await app.act("rating", trade, stranger.token, json: ["score": 3]).status == .notFound)
            #expect(try await app.act("counter", trade, stranger.token, json: ["offered_copy_id": copy]).status == .notFound)
            #expect(try await app.tradeState(trade) == "requested")
            let strangers = try await app.request(.get, "/v1/me/trades", token: stranger.token).jsonObject()
            #expect((strangers["data"] as? [Any])?.isEmpty == true)
            let events = try await app.request(.get, "/v1/trades/\(trade)", token: owner.token).jsonObject()["events"] as? [Any]
            #expect(events?.count == 1)
        }
    }
}
