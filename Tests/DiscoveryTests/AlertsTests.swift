import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Places
@testable import Discovery
@testable import BookwormTestSupport

/// Alerts: a copy that becomes available near a wish (API.md, Shelf).
@Suite struct AlertsTests {
    @Test func aCopyFlippingAvailableReservedAvailableAlertsEachWishOnceWithOneMail() async throws {
        try await withSink { sink in
            try await withApp { app in
                let wisher = try await app.registerVerified(sink)
                try await app.addPin(wisher.token, latitude: 52.52, longitude: 13.405)
                #expect(try await app.request(.patch, "/v1/me", json: ["alerts": "instant"], token: wisher.token).status == .ok)
                let owner = try await app.wisher(at: 52.53, 13.42)
                let first = try await app.book(owner.token, title: "The Dispossessed", authors: ["Ursula K. Le Guin"])
                try await app.runJobs()
                #expect(try await app.wish(wisher.token, book: first).status == .created)

                // Listing a copy does not wait for the fan-out: the alert exists once the worker ran.
                let copy = try await app.offer(owner.token, title: "The Dispossessed", authors: ["Ursula K. Le Guin"]).copy
                #expect(try await app.alertRows(wisher.id) == 0)
                try await app.runJobs()
                #expect(try await app.alertRows(wisher.id) == 1)

                // Reserved by a trade, released, withdrawn, available again: still one alert, one mail.
                let taker = try await app.wisher(at: 52.50, 13.40)
                let trade = try await app.trade(taker.token, copy: copy)
                #expect(try await app.act("accept", trade, owner.token).status == .ok)
                #expect(try await app.copyRow(copy).status == "reserved")
                #expect(try await app.act("cancel", trade, owner.token).status == .ok)
                #expect(try await app.request(.patch, "/v1/copies/\(copy)", json: ["status": "withdrawn"], token: owner.token).status == .ok)
                #expect(try await app.request(.patch, "/v1/copies/\(copy)", json: ["status": "available"], token: owner.token).status == .ok)
                try await app.runJobs()
                #expect(try await app.alertRows(wisher.id) == 1)
                #expect(try await app.alertMails().filter { $0.to == wisher.email }.count == 1)

                let listed = try await app.alerts(wisher.token)
                #expect(listed.count == 1)
                #expect((listed.first?["copy"] as? [String: Any])?["id"] as? String == copy)
                #expect(((listed.first?["wish"] as? [String: Any])?["book"] as? [String: Any])?["title"] as? String == "The Dispossessed")
                let distance = try #require(listed.first?["distance_km"] as? Double)
                #expect(distance > 0 && distance < 3)

                // End to end: the mail reaches the wisher, naming the book and the owner, not the owner's address.
                try await app.deliver(to: sink)
                let mail = try #require(sink.messages().last { $0.envelopeTo == wisher.email })
                #expect(mail.decodedHeader("Subject")?.contains("The Dispossessed") == true)
                #expect(mail.body.contains(owner.username) && !mail.raw.contains(owner.email))
            }
        }
    }

    /// Copies listed together (an import's) queue a job each; the runner looks up a claimed
    /// batch of them in one statement, and a wished copy among them is still fanned out.
    @Test func copiesListedTogetherAreLookedUpABatchAtATimeAndAWishedOneStillAlerts() async throws {
        try await withApp { app in
            try await app.db.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            let wisher = try await app.wisher(at: 52.52, 13.405)
            let owner = try await app.wisher(at: 52.53, 13.42)
            let wished = try await app.book(owner.token, title: "The Dispossessed", authors: ["Ursula K. Le Guin"])
            #expect(try await app.wish(wisher.token, book: wished).status == .created)
            try await app.runJobs()
            for index in 0..<39 { _ = try await app.offer(owner.token, title: "Unwished \(index)") }
            _ = try await app.offer(owner.token, title: "The Dispossessed", authors: ["Ursula K. Le Guin"])
            #expect(try await app.jobRows(kind: "alerts.copy") == 40)

            let before = try await app.statementCounts()
            try await app.runJobs()
            let after = try await app.statementCounts()
            let runs = TestApp.runs(since: before, now: after)
            let batches = runs.filter { $0.key.contains("ANY($1)") && $0.key.contains(OfferSQL.sql.suffix(40)) }.values.reduce(0, +)
            let copies = runs.filter { $0.key.contains("c.id = $1") && $0.key.contains(OfferSQL.sql.suffix(40)) }.values.reduce(0, +)
            // Claims of 20: a lookup for each, then the wished copy read again in each of its
            // fan-out's two transactions (the alert's, and the one that finds no more wishes).
            // With the group run a job at a time, it was 40 lookups and 2.
            #expect(batches == 2 && copies == 2, "\(batches) lookups of a batch, \(copies) of a copy")
            #expect(try await app.jobRows(kind: "alerts.copy") == 0)
            #expect(try await app.alertRows(wisher.id) == 1)
        }
    }

    @Test func aNewWishIsToldOfTheCopiesAlreadyOnOfferNearItInOneMail() async throws {
        try await withApp { app in
            let wisher = try await app.wisher(at: 52.52, 13.405)
            let near = try await app.wisher(at: 52.53, 13.42), nearer = try await app.wisher(at: 52.521, 13.406)
            let munich = try await app.wisher(at: 48.137, 11.575), blocked = try await app.wisher(at: 52.522, 13.41)
            let book = try await app.book(near.token, title: "Austerlitz", authors: ["W. G. Sebald"])
            func offer(_ account: TestApp.Account) async throws -> String {
                try await app.offer(account.token, title: "Austerlitz", authors: ["W. G. Sebald"]).copy
            }
            let onOffer = try await offer(near), nearest = try await offer(nearer), withdrawn = try await offer(nearer)
            _ = try await offer(munich)
            _ = try await offer(blocked)
            _ = try await offer(wisher)
            #expect(try await app.request(.patch, "/v1/copies/\(withdrawn)", json: ["status": "withdrawn"], token: nearer.token).status == .ok)
            #expect(try await app.request(.put, "/v1/users/\(blocked.username)/block", token: wisher.token).status == .noContent)
            try await app.runJobs()

            #expect(try await app.wish(wisher.token, book: book).status == .created)
            #expect(try await app.alertRows(wisher.id) == 0, "the wish only queued its job")
            try await app.runJobs()
            let listed = try await app.alerts(wisher.token).compactMap { ($0["copy"] as? [String: Any])?["id"] as? String }
            #expect(Set(listed) == [onOffer, nearest], "not withdrawn, not 500 km away, not blocked, not the wisher's own")
            let mails = try await app.alertMails().filter { $0.to == wisher.email }
            #expect(mails.count == 1)
            #expect(mails.first?.subject.contains("\"Austerlitz\" is available") == true, "\(mails.map(\.subject))")
            let content = mails.first?.content ?? ""
            let first = try #require(content.range(of: nearer.username)), second = try #require(content.range(of: near.username))
            #expect(first.lowerBound < second.lowerBound, "nearest first")

            // The copy offered again later is alerted by its own fan-out, once; the others not again.
            #expect(try await app.request(.patch, "/v1/copies/\(withdrawn)", json: ["status": "available"], token: nearer.token).status == .ok)
            try await app.runJobs()
            #expect(try await app.alertRows(wisher.id) == 3)
            #expect(try await app.alertMails().filter { $0.to == wisher.email }.count == 2)
        }
    }

    @Test func wishesMadeTogetherAreToldInOneMail() async throws {
        try await withApp { app in
            let wisher = try await app.wisher(at: 52.52, 13.405), owner = try await app.wisher(at: 52.53, 13.41)
            var books: [String] = []
            for title in ["Dune", "Emma", "Ulysses"] {
                books.append(try await app.book(owner.token, title: title, authors: ["Someone"]))
                _ = try await app.offer(owner.token, title: title, authors: ["Someone"])
            }
            try await app.runJobs()
            for book in books { #expect(try await app.wish(wisher.token, book: book).status == .created) }
            let queued = try await app.count("SELECT count(*)::int8 FROM jobs WHERE kind = 'alerts.wish'", user: "")
            #expect(queued == 1, "one job for the wisher, not one per wish")
            try await app.runJobs()
            #expect(try await app.alertRows(wisher.id) == 3)
            let mails = try await app.alertMails().filter { $0.to == wisher.email }
            #expect(mails.map(\.subject) == ["3 books you wish for are available near you"])
            #expect(["Dune", "Emma", "Ulysses"].allSatisfy { mails.first?.content.contains($0) == true })
        }
    }

    @Test func aNewWishForABookOnOfferEverywhereHearsOfTheNearestFew() async throws {
        try await withApp { app in
            let wisher = try await app.wisher(at: 52.52, 13.405)
            let book = try await app.book(wisher.token, title: "Kindred", authors: ["Octavia E. Butler"])
            var byDistance: [String] = []
            for step in 1...4 {
                let owner = try await app.wisher(at: 52.52 + 0.02 * Double(step), 13.405)
                byDistance.append(try await app.offer(owner.token, title: "Kindred", authors: ["Octavia E. Butler"]).copy)
            }
            try await app.runJobs()
            #expect(try await app.wish(wisher.token, book: book).status == .created)
            try await app.runJobs(wishes: WishPolicy(alertsPerNewWish: 2))
            let listed = try await app.alerts(wisher.token).compactMap { ($0["copy"] as? [String: Any])?["id"] as? String }
            #expect(Set(listed) == Set(byDistance.prefix(2)))
        }
    }

    @Test func aCopyGivenAwayAlertsWishersNearItsNewOwner() async throws {
        try await withApp { app in
            let owner = try await app.wisher(at: 52.52, 13.405)
            let (copy, book) = try await app.offer(owner.token, title: "Kindred", authors: ["Octavia E. Butler"])
            let munich = try await app.wisher(at: 48.137, 11.575)
            #expect(try await app.wish(munich.token, book: book).status == .created)
            try await app.runJobs()
            #expect(try await app.alertRows(munich.id) == 0)

            let taker = try await app.wisher(at: 48.14, 11.58)
            let trade = try await app.trade(taker.token, copy: copy)
            #expect(try await app.act("accept", trade, owner.token).status == .ok)
            #expect(try await app.act("confirm", trade, taker.token).status == .ok)
            #expect(try await app.act("confirm", trade, owner.token).status == .ok)
            #expect(try await app.copyRow(copy) == (taker.username, "available"))
            try await app.runJobs()
            #expect(try await app.alertRows(munich.id) == 1)
        }
    }

    @Test func editionsConditionsOwnCopiesAndBlocksDecideWhoIsAlerted() async throws {
        try await withApp { app in
            let owner = try await app.wisher(at: 52.52, 13.405)
            let paperback = try await app.book(owner.token, title: "Solaris", authors: ["Stanisław Lem"], isbn: "9783000000010")
            try await app.runJobs()
            let anyEdition = try await app.wisher(), exact = try await app.wisher(), picky = try await app.wisher()
            let blocked = try await app.wisher(), blocker = try await app.wisher()
            // Another edition: same work, another ISBN (and a subtitle).
            let hardcover = try await app.request(.post, "/v1/books", json: [
                "isbn": "9783000000027", "title": "Solaris: A Novel", "authors": ["Stanislaw Lem"]], token: owner.token)
            let hardcoverID = try #require(try hardcover.jsonObject()["id"] as? String)
            #expect(try await app.wish(anyEdition.token, book: hardcoverID).status == .created)
            #expect(try await app.wish(exact.token, book: hardcoverID, extra: ["any_edition": false]).status == .created)
            #expect(try await app.wish(picky.token, book: paperback, extra: ["min_condition": "like_new"]).status == .created)
            #expect(try await app.wish(blocked.token, book: paperback).status == .created)
            #expect(try await app.wish(blocker.token, book: paperback).status == .created)
            #expect(try await app.wish(owner.token, book: paperback).status == .created)
            #expect(try await app.request(.put, "/v1/users/\(blocked.username)/block", token: owner.token).status == .noContent)
            #expect(try await app.request(.put, "/v1/users/\(owner.username)/block", token: blocker.token).status == .noContent)

            _ = try await app.offer(owner.token, title: "Solaris", isbn: "9783000000010", condition: "good")
            try await app.runJobs()
            #expect(try await app.alertRows(anyEdition.id) == 1)
            #expect(try await app.alertRows(exact.id) == 0)
            #expect(try await app.alertRows(picky.id) == 0)
            #expect(try await app.alertRows(blocked.id) == 0)
            #expect(try await app.alertRows(blocker.id) == 0)
            #expect(try await app.alertRows(owner.id) == 0)

            // A block made later hides the alert; deleting the copy removes it.
            #expect(try await app.alerts(anyEdition.token).count == 1)
            #expect(try await app.request(.put, "/v1/users/\(owner.username)/block", token: anyEdition.token).status == .noContent)
            #expect(try await app.alerts(anyEdition.token).isEmpty)
            #expect(try await app.request(.delete, "/v1/users/\(owner.username)/block", token: anyEdition.token).status == .noContent)
            let alerted = try #require((try await app.alerts(anyEdition.token).first?["copy"] as? [String: Any])?["id"] as? String)
            #expect(try await app.request(.delete, "/v1/copies/\(alerted)", token: owner.token).status == .noContent)
            #expect(try await app.alertRows(anyEdition.id) == 0)
        }
    }

    @Test func theRadiusIsMeasuredBetweenPublicPointsAtTheEdgeAndAcrossTheAntimeridian() async throws {
        try await withApp { app in
            let home = GeoPoint(latitude: 52.5203, longitude: 13.4051), shop = GeoPoint(latitude: 52.7105, longitude: 13.6207)
            let exactKm = Geo.distanceKm(home, shop)
            let publicKm = Geo.distanceKm(Geo.cellCentre(of: home), Geo.cellCentre(of: shop))
            #expect(abs(exactKm - publicKm) > 0.05, "the points must tell public from exact distances")
            let owner = try await app.wisher(at: shop.latitude, shop.longitude)
            let book = try await app.book(owner.token, title: "Stoner", authors: ["John Williams"])
            try await app.runJobs()
            let inside = try await app.wisher(at: home.latitude, home.longitude)
            let outside = try await app.wisher(at: home.latitude, home.longitude)
            let between = try await app.wisher(at: home.latitude, home.longitude)
            #expect(try await app.wish(inside.token, book: book, extra: ["radius_km": publicKm + 0.001]).status == .created)
            #expect(try await app.wish(outside.token, book: book, extra: ["radius_km": publicKm - 0.001]).status == .created)
            #expect(try await app.wish(between.token, book: book, extra: ["radius_km": (exactKm + publicKm) / 2]).status == .created)

            let copy = try await app.offer(owner.token, title: "Stoner", authors: ["John Williams"]).copy
            try await app.runJobs()
            #expect(try await app.alertRows(inside.id) == 1)
            #expect(try await app.alertRows(outside.id) == 0)
            #expect(try await app.alertRows(between.id) == (publicKm <= (exactKm + publicKm) / 2 ? 1 : 0))
            let before = try #require(try await app.alerts(inside.token).first?["distance_km"] as? Double)

            // Moving the home inside its cell changes nothing anyone can see.
            let pin = try #require(try await app.pins(inside.token).first?["id"] as? String)
            let moved = [GeoPoint(latitude: home.latitude + 0.0002, longitude: home.longitude),
                         GeoPoint(latitude: home.latitude - 0.0002, longitude: home.longitude)]
                .first { Geo.cellCentre(of: $0) == Geo.cellCentre(of: home) }
            let point = try #require(moved)
            #expect(try await app.request(.patch, "/v1/me/pins/\(pin)", json: ["latitude": point.latitude, "longitude": point.longitude],
                                          token: inside.token).status == .ok)
            #expect(try await app.request(.patch, "/v1/copies/\(copy)", json: ["status": "withdrawn"], token: owner.token).status == .ok)
            #expect(try await app.request(.patch, "/v1/copies/\(copy)", json: ["status": "available"], token: owner.token).status == .ok)
            _ = try await app.offer(owner.token, title: "Stoner", authors: ["John Williams"])
            try await app.runJobs()
            let after = try await app.alerts(inside.token).compactMap { $0["distance_km"] as? Double }
            #expect(after == [before, before])
            #expect(try await app.alertRows(outside.id) == 0)

            // Fiji: a few hundred metres apart across the 180th meridian.
            let east = try await app.wisher(at: -17.0, 179.998)
            let west = try await app.wisher(at: -17.0, -179.998)
            let dateLine = try await app.book(west.token, title: "Moby-Dick", authors: ["Herman Melville"])
            try await app.runJobs()
            #expect(try await app.wish(east.token, book: dateLine, extra: ["radius_km": 5]).status == .created)
            _ = try await app.offer(west.token, title: "Moby-Dick", authors: ["Herman Melville"])
            try await app.runJobs()
            let crossing = try await app.alerts(east.token)
            #expect(crossing.count == 1)
            #expect((crossing.first?["distance_km"] as? Double ?? 99) < 3)
        }
    }
}
