import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Places
@testable import Discovery
@testable import BookwormApp
@testable import BookwormTestSupport


@Suite struct FeedTests {
    @Test func newUserPostsAnOfferAndAWantedNoteSeesThemNearbyAndDeletesTheOffer() async throws {
        try await withApp { app in
            let alice = try await app.register()
            let bob = try await app.register()
            let carol = try await app.register()
            try await app.addPin(alice.token, latitude: 52.52, longitude: 13.405)
            try await app.addPin(bob.token, latitude: 52.50, longitude: 13.42)
            try await app.addPin(carol.token, label: "Paris", latitude: 48.857, longitude: 2.352)
            let copy = try await app.addCopy(alice.token, title: "Der Zauberberg", authors: ["Thomas Mann"])
            let copyID = try #require(copy["id"] as? String)
            let offer = try await app.addPost(alice.token, kind: "offer", body: "Zauberberg for trade", extra: ["copy_id": copyID])
            let wanted = try await app.addPost(alice.token, kind: "wanted", body: "Looking for Buddenbrooks")
            let offerID = try #require(offer["id"] as? String)
            let wantedID = try #require(wanted["id"] as? String)
            #expect((offer["book"] as? [String: Any])?["title"] as? String == "Der Zauberberg")
            #expect(offer["copy_id"] as? String == copyID)
            #expect((offer["author"] as? [String: Any])?["username"] as? String == alice.username)
            #expect(offer["distance_km"] is NSNull)

            #expect(try await app.feedIDs("/v1/posts") == [wantedID, offerID])
            let nearBerlin = "/v1/posts?latitude=52.51&longitude=13.41&radius_km=10"
            #expect(try await app.feedIDs(nearBerlin, token: bob.token) == [wantedID, offerID])
            #expect(try await app.feedIDs("/v1/posts?latitude=48.857&longitude=2.352&radius_km=10", token: carol.token).isEmpty)
            let page = try await app.request(.get, nearBerlin, token: bob.token).jsonObject()
            let first = try #require((page["data"] as? [[String: Any]])?.first)
            #expect(first["distance_km"] as? Double != nil)

            #expect(try await app.request(.delete, "/v1/posts/\(offerID)", token: alice.token).status == .noContent)
            #expect(try await app.feedIDs("/v1/posts") == [wantedID])
            #expect(try await app.feedIDs(nearBerlin, token: bob.token) == [wantedID])
            #expect(try await app.request(.get, "/v1/posts/\(offerID)").status == .notFound)
        }
    }

    @Test func invalidPostsAreRefusedNamingTheField() async throws {
        try await withApp { app in
            let user = try await app.register()
            let cases: [([String: any Sendable], String)] = [
                (["kind": "selling", "body": "x"], "kind"),
                (["body": "x"], "kind"),
                (["kind": "offer", "body": "   \n  "], "body"),
                (["kind": "offer", "body": String(repeating: "é", count: 2001)], "body"),
                (["kind": "offer", "body": "tab\there"], "body"),
                (["kind": "offer", "body": "bell\u{07}"], "body"),
                (["kind": "offer", "body": "x", "price": 3], "price"),
                (["kind": "offer", "body": "x", "book_id": "not-a-uuid"], "book_id"),
            ]
            for (json, field) in cases {
                let response = try await app.request(.post, "/v1/posts", json: json, token: user.token)
                #expect(response.status == .badRequest, "\(json)")
                #expect(response.isProblem)
                #expect(try response.problemFields().contains(field), "\(json): \(String(buffer: response.body))")
            }
            #expect(try await app.request(.post, "/v1/posts", json: ["kind": "offer", "body": "x"]).status == .unauthorized)
            #expect(try await app.feedIDs("/v1/posts").isEmpty)

            let longest = String(repeating: "é", count: 2000)
            #expect(try await app.addPost(user.token, body: longest)["body"] as? String == longest)
            let text = "  Tausche Bücher 📚\r\nzweite Zeile'); DROP TABLE posts;--  "
            let post = try await app.addPost(user.token, kind: "wanted", body: text)
            #expect(post["body"] as? String == "Tausche Bücher 📚\nzweite Zeile'); DROP TABLE posts;--")
        }
    }

    @Test func linkedCopyPinAndBookMustBeTheAuthors() async throws {
        try await withApp { app in
            let alice = try await app.register()
            let bob = try await app.register()
            let bobsPin = try #require(try await app.addPin(bob.token)["id"] as? String)
            let bobsCopy = try await app.addCopy(bob.token, title: "Moby-Dick")
            let bobsCopyID = try #require(bobsCopy["id"] as? String)
            let otherBook = try #require((try await app.addCopy(alice.token, title: "Emma")["book"] as? [String: Any])?["id"] as? String)
            let refused: [[String: any Sendable]] = [
                ["copy_id": bobsCopyID],
                ["pin_id": bobsPin],
                ["book_id": UUID().uuidString],
                ["copy_id": UUID().uuidString],
            ]
            for extra in refused {
                let json: [String: any Sendable] = ["kind": "offer", "body": "x \(extra)"].merging(extra) { $1 }
                let response = try await app.request(.post, "/v1/posts", json: json, token: alice.token)
                #expect(response.status == .unprocessableContent, "\(extra)")
                #expect(response.isProblem)
            }
            // A copy's post is about that copy's book; naming another book with it is refused.
            let mismatch = try await app.request(.post, "/v1/posts", json: ["kind": "offer", "body": "mismatch",
                                                                             "copy_id": bobsCopyID, "book_id": otherBook], token: bob.token)
            #expect(mismatch.status == .unprocessableContent)
            let post = try await app.addPost(bob.token, body: "Moby-Dick, good", extra: ["copy_id": bobsCopyID, "pin_id": bobsPin])
            #expect((post["book"] as? [String: Any])?["title"] as? String == "Moby-Dick")
            #expect(try await app.feedIDs("/v1/posts").count == 1)
        }
    }

    @Test func deletingSomeoneElsesPostIsForbiddenAndLeavesItUnchanged() async throws {
        try await withApp { app in
            let alice = try await app.register()
            let mallory = try await app.register()
            let post = try await app.addPost(alice.token, body: "Mine")
            let id = try #require(post["id"] as? String)
            let before = try await app.request(.get, "/v1/posts/\(id)")
            #expect(try await app.request(.delete, "/v1/posts/\(id)", token: mallory.token).status == .forbidden)
            #expect(try await app.request(.delete, "/v1/posts/\(id)").status == .unauthorized)
            #expect(try await app.request(.delete, "/v1/posts/\(UUID().uuidString)", token: alice.token).status == .notFound)
            #expect(try await app.request(.delete, "/v1/posts/nope", token: alice.token).status == .badRequest)
            let after = try await app.request(.get, "/v1/posts/\(id)")
            #expect(after.status == .ok)
            #expect(String(buffer: after.body) == String(buffer: before.body))
        }
    }

    /// One prepared statement reads the post and whether others may see it (`PostDetailSQL`).
    @Test func aPostHiddenByReportsOrOfASuspendedAuthorIsShownToItsAuthorOnly() async throws {
        try await withApp { app in
            let alice = try await app.register()
            let reader = try await app.register()
            let id = try #require(try await app.addPost(alice.token, body: "Hidden soon")["id"] as? String)
            let post = try #require(UUID(uuidString: id))
            func statuses() async throws -> [HTTPResponse.Status] {
                try await app.statuses("/v1/posts/\(id)", tokens: [alice.token, reader.token, nil])
            }
            #expect(try await statuses() == [.ok, .ok, .ok])
            try await app.db.query("UPDATE posts SET hidden_at = now() WHERE id = \(post)")
            #expect(try await statuses() == [.ok, .notFound, .notFound])
            try await app.db.query("UPDATE posts SET hidden_at = NULL WHERE id = \(post)")
            try await app.db.query("UPDATE users SET suspended_at = now() WHERE id = (SELECT author_id FROM posts WHERE id = \(post))")
            #expect(try await app.request(.get, "/v1/posts/\(id)", token: reader.token).status == .notFound)
            try await app.db.query("UPDATE users SET suspended_at = NULL WHERE id = (SELECT author_id FROM posts WHERE id = \(post))")
            #expect(try await statuses() == [.ok, .ok, .ok])
            #expect(try await app.request(.get, "/v1/posts/\(UUID().uuidString)", token: reader.token).status == .notFound)
        }
    }

    @Test func deletedPostsVanishFromEveryFeed() async throws {
        try await withApp { app in
            let alice = try await app.register()
            let viewer = try await app.register()
            try await app.addPin(alice.token, kind: "meetup")
            let copy = try await app.addCopy(alice.token, title: "Ulysses")
            let bookID = try #require((copy["book"] as? [String: Any])?["id"] as? String)
            let post = try await app.addPost(alice.token, body: "Ulysses to trade", extra: ["copy_id": copy["id"] as? String ?? ""])
            let id = try #require(post["id"] as? String)
            let feeds = ["/v1/posts", "/v1/posts?kind=offer", "/v1/posts?author=\(alice.username)", "/v1/posts?book_id=\(bookID)",
                         "/v1/posts?latitude=52.52&longitude=13.405&radius_km=5"]
            for feed in feeds { #expect(try await app.feedIDs(feed, token: viewer.token) == [id], "\(feed)") }
            #expect(try await app.request(.delete, "/v1/posts/\(id)", token: alice.token).status == .noContent)
            for feed in feeds { #expect(try await app.feedIDs(feed, token: viewer.token).isEmpty, "\(feed)") }
            #expect(try await app.request(.get, "/v1/posts/\(id)").status == .notFound)
            #expect(try await app.request(.delete, "/v1/posts/\(id)", token: alice.token).status == .notFound)
        }
    }

    @Test func feedFiltersByKindAuthorAndBook() async throws {
        try await withApp { app in
            let alice = try await app.register()
            let bob = try await app.register()
            let copy = try await app.addCopy(alice.token, title: "Dune")
            let bookID = try #require((copy["book"] as? [String: Any])?["id"] as? String)
            let offer = try #require(try await app.addPost(alice.token, body: "Dune", extra: ["book_id": bookID])["id"] as? String)
            let wanted = try #require(try await app.addPost(bob.token, kind: "wanted", body: "Anyone has Dune?",
                                                            extra: ["book_id": bookID])["id"] as? String)
            let other = try #require(try await app.addPost(bob.token, body: "Old atlases")["id"] as? String)
            #expect(try await app.feedIDs("/v1/posts?kind=offer") == [other, offer])
            #expect(try await app.feedIDs("/v1/posts?kind=wanted") == [wanted])
            #expect(try await app.feedIDs("/v1/posts?author=\(bob.username.uppercased())") == [other, wanted])
            #expect(try await app.feedIDs("/v1/posts?book_id=\(bookID)") == [wanted, offer])
            #expect(try await app.feedIDs("/v1/posts?book_id=\(bookID)&kind=offer&author=\(alice.username)") == [offer])
            #expect(try await app.feedIDs("/v1/posts?author=nobody_here").isEmpty)
            for (query, field) in [("kind=selling", "kind"), ("book_id=12", "book_id"), ("cursor=%21%21", "cursor"),
                                   ("limit=0", "limit"), ("latitude=52", "longitude"), ("kind=offer&kind=wanted", "query.kind")] {
                let response = try await app.request(.get, "/v1/posts?\(query)", token: alice.token)
                // Latitude without longitude is a rule between fields (422); the rest break the schema.
                #expect(response.status == (query == "latitude=52" ? .unprocessableContent : .badRequest), "\(query)")
                #expect(try response.problemFields().contains(field), "\(query): \(String(buffer: response.body))")
            }
            // Distances to people need an account, as nearby copies do.
            #expect(try await app.request(.get, "/v1/posts?latitude=52&longitude=13").status == .unauthorized)
            #expect(try await app.request(.get, "/v1/posts", token: "not-a-token").status == .unauthorized)
        }
    }

    @Test func cursorPagesNeitherRepeatNorSkipWhileNewPostsArrive() async throws {
        try await withApp { app in
            let alice = try await app.register()
            let original = try await app.insertPosts(author: alice.id, count: 23)
            var seen: [String] = []
            var cursor: String?
            repeat {
                let url = "/v1/posts?limit=5" + (cursor.map { "&cursor=\($0)" } ?? "")
                let body = try await app.request(.get, url).jsonObject()
                seen += (body["data"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
                cursor = body["next_cursor"] as? String
                _ = try await app.insertPosts(author: alice.id, count: 2)
            } while cursor != nil
            #expect(seen == Array(original.reversed()))
        }
    }

    @Test func nearbyFeedIncludesTheRadiusEdgeAndCrossesTheAntimeridian() async throws {
        try await withApp { app in
            let viewer = try await app.register()
            let origin = GeoPoint(latitude: -17.7, longitude: 179.95)
            var expected: [String: Double] = [:]
            // Meetup pins publish their exact point, so distances can be placed at the edge.
            let spots: [(String, Double, Double)] = [("inside edge", -17.7, -179.95588), ("outside edge", -17.7, -179.95532),
                                                    ("same side", -17.65, 179.95), ("far", -17.7, -179.0)]
            for (label, latitude, longitude) in spots {
                let author = try await app.register()
                try await app.addPin(author.token, label: label, latitude: latitude, longitude: longitude, kind: "meetup")
                let id = try #require(try await app.addPost(author.token, body: label)["id"] as? String)
                expected[id] = Geo.distanceKm(origin, GeoPoint(latitude: latitude, longitude: longitude))
            }
            let radius = 10.0
            let path = "/v1/posts?latitude=\(origin.latitude)&longitude=\(origin.longitude)&radius_km=\(radius)"
            let body = try await app.request(.get, path + "&limit=100", token: viewer.token).jsonObject()
            let rows = body["data"] as? [[String: Any]] ?? []
            let got = Set(rows.compactMap { $0["id"] as? String })
            let within = Set(expected.filter { $0.value <= radius }.keys)
            #expect(expected.values.contains { $0 > 9.9 && $0 <= radius })
            #expect(expected.values.contains { $0 > radius && $0 < 10.1 })
            #expect(within.count == 2)
            #expect(got == within)
            for row in rows {
                let id = try #require(row["id"] as? String)
                #expect(row["distance_km"] as? Double == Nearby.rounded(try #require(expected[id])))
            }
        }
    }

    @Test func homePostsAreMeasuredToTheCellCentreOnly() async throws {
        try await withApp { app in
            let viewer = try await app.register()
            let alice = try await app.register()
            let exact = GeoPoint(latitude: 52.51234, longitude: 13.40123)
            try await app.addPin(alice.token, latitude: exact.latitude, longitude: exact.longitude, kind: "home")
            try await app.addPost(alice.token, body: "Near me")
            let origin = GeoPoint(latitude: 52.53, longitude: 13.38)
            let response = try await app.request(.get, "/v1/posts?latitude=\(origin.latitude)&longitude=\(origin.longitude)",
                                                 token: viewer.token)
            let text = String(buffer: response.body)
            #expect(!text.contains("52.51234") && !text.contains("13.40123"))
            let row = try #require((try response.jsonObject()["data"] as? [[String: Any]])?.first)
            let publicPoint = PinKind.home.publicPoint(for: exact)
            #expect(row["distance_km"] as? Double == Nearby.rounded(Geo.distanceKm(origin, publicPoint)))
        }
    }

    @Test func feedPagesAndPostsAnswerNotModifiedToTheirETag() async throws {
        try await withApp { app in
            let alice = try await app.register()
            let id = try #require(try await app.addPost(alice.token)["id"] as? String)
            for path in ["/v1/posts", "/v1/posts/\(id)"] {
                let first = try await app.request(.get, path)
                let etag = try #require(first.headers[.eTag])
                let again = try await app.request(.get, path, headers: [.ifNoneMatch: etag])
                #expect(again.status == .notModified, "\(path)")
            }
            let etag = try #require(try await app.request(.get, "/v1/posts").headers[.eTag])
            try await app.addPost(alice.token, body: "Another")
            #expect(try await app.request(.get, "/v1/posts", headers: [.ifNoneMatch: etag]).status == .ok)
        }
    }
}
