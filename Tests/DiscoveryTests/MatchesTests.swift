import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Discovery
@testable import BookwormTestSupport

/// Matches: people near me with whom books can go both ways (API.md, Shelf).
@Suite struct MatchesTests {
    @Test func aTwoWayMatchAppearsOnlyWhenBothDirectionsHold() async throws {
        try await withApp { app in
            let ana = try await app.wisher(at: 52.52, 13.405), ben = try await app.wisher(at: 52.53, 13.42)
            let cleo = try await app.wisher(at: 52.51, 13.39)
            let (anasCopy, anasBook) = try await app.offer(ana.token, title: "Beloved", authors: ["Toni Morrison"])
            let (bensCopy, bensBook) = try await app.offer(ben.token, title: "Austerlitz", authors: ["W. G. Sebald"])
            _ = try await app.offer(cleo.token, title: "Austerlitz", authors: ["W. G. Sebald"])
            #expect(try await app.wish(ana.token, book: bensBook).status == .created)
            #expect(try await app.matches(ana.token).isEmpty, "Ben wants nothing of Ana's yet")

            #expect(try await app.wish(ben.token, book: anasBook).status == .created)
            let anas = try await app.matches(ana.token)
            #expect(anas.count == 1, "Cleo has the book but wants nothing of Ana's")
            let match = try #require(anas.first)
            #expect((match["user"] as? [String: Any])?["username"] as? String == ben.username)
            #expect((match["they_have"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [bensCopy])
            #expect((match["i_have"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [anasCopy])
            #expect((match["distance_km"] as? Double ?? 0) > 0)
            let bens = try await app.matches(ben.token)
            #expect(bens.compactMap { ($0["user"] as? [String: Any])?["username"] as? String } == [ana.username])

            // A copy no longer on offer breaks the match; a block hides it.
            #expect(try await app.request(.patch, "/v1/copies/\(anasCopy)", json: ["status": "withdrawn"], token: ana.token).status == .ok)
            #expect(try await app.matches(ben.token).isEmpty)
            #expect(try await app.request(.patch, "/v1/copies/\(anasCopy)", json: ["status": "available"], token: ana.token).status == .ok)
            #expect(try await app.request(.put, "/v1/users/\(ana.username)/block", token: ben.token).status == .noContent)
            #expect(try await app.matches(ana.token).isEmpty)
            #expect(try await app.matches(ben.token).isEmpty)
        }
    }

    @Test func mostMutualComeFirstThenNearestWithinTheRadius() async throws {
        try await withApp { app in
            let me = try await app.wisher(at: 52.52, 13.405)
            let near = try await app.wisher(at: 52.53, 13.41), farther = try await app.wisher(at: 52.60, 13.50)
            let generous = try await app.wisher(at: 52.65, 13.55), distant = try await app.wisher(at: 53.55, 10.0)
            let mine1 = try await app.offer(me.token, title: "Mine One", authors: ["A"]).book
            let mine2 = try await app.offer(me.token, title: "Mine Two", authors: ["A"]).book
            for (index, partner) in [near, farther, generous, distant].enumerated() {
                let theirs = try await app.offer(partner.token, title: "Theirs \(index)", authors: ["B"]).book
                #expect(try await app.wish(me.token, book: theirs).status == .created)
                #expect(try await app.wish(partner.token, book: mine1).status == .created)
            }
            // `generous` has two books I want and wants both of mine: most mutual, though farthest in town.
            let extra = try await app.offer(generous.token, title: "Theirs Extra", authors: ["B"]).book
            #expect(try await app.wish(me.token, book: extra).status == .created)
            #expect(try await app.wish(generous.token, book: mine2).status == .created)

            let order = try await app.matches(me.token).compactMap { ($0["user"] as? [String: Any])?["username"] as? String }
            #expect(order == [generous.username, near.username, farther.username])
            let wide = try await app.matches(me.token, query: "?radius_km=300")
            #expect(wide.compactMap { ($0["user"] as? [String: Any])?["username"] as? String }.last == distant.username)
            #expect(try await app.matches(me.token, query: "?radius_km=300&limit=1").count == 1)

            for bad in ["?radius_km=0", "?radius_km=501", "?radius_km=abc", "?limit=0"] {
                let response = try await app.request(.get, "/v1/me/matches" + bad, token: me.token)
                #expect(response.status == .badRequest, "\(bad)")
                #expect(response.isProblem)
            }
            let lost = try await app.register()
            let noPin = try await app.request(.get, "/v1/me/matches", token: lost.token)
            #expect(noPin.status == .unprocessableContent)
            #expect(try noPin.jsonObject()["type"] as? String == "https://bookworm.example/problems/pin_required")
        }
    }
}
