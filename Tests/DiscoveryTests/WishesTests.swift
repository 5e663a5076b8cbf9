import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Discovery
@testable import BookwormTestSupport

/// Wishes: a book I want, measured from a pin of mine (API.md, Shelf).
@Suite struct WishesTests {
    @Test func aWishDefaultsToAnyEditionWithin25KmOfTheDefaultPin() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let book = try await app.offer(owner.token, title: "Solaris", authors: ["Stanisław Lem"]).book
            let wisher = try await app.register()
            let noPin = try await app.wish(wisher.token, book: book)
            #expect(noPin.status == .unprocessableContent)
            #expect(try noPin.jsonObject()["type"] as? String == "https://bookworm.example/problems/pin_required")
            #expect((try await app.request(.get, "/v1/me/wishes", token: wisher.token).jsonObject()["data"] as? [Any])?.isEmpty == true)

            try await app.addPin(wisher.token)
            let created = try await app.wish(wisher.token, book: book)
            #expect(created.status == .created)
            let wish = try created.jsonObject()
            #expect(wish["any_edition"] as? Bool == true && wish["radius_km"] as? Double == 25)
            #expect(wish["pin_id"] is NSNull && wish["min_condition"] is NSNull)
            #expect((wish["book"] as? [String: Any])?["title"] as? String == "Solaris")

            let again = try await app.wish(wisher.token, book: book, extra: ["radius_km": 5])
            #expect(again.status == .conflict)
            #expect(try again.problemFields() == ["book_id"])

            // A wish for a book I own myself is allowed.
            let mine = try await app.offer(wisher.token, title: "Fiasco", authors: ["Stanisław Lem"]).book
            #expect(try await app.wish(wisher.token, book: mine, extra: ["min_condition": "like_new"]).status == .created)

            let list = try await app.request(.get, "/v1/me/wishes", token: wisher.token).jsonObject()["data"] as? [[String: Any]]
            #expect(list?.count == 2)
            let id = try #require(wish["id"] as? String)
            #expect(try await app.request(.delete, "/v1/me/wishes/\(id)", token: owner.token).status == .notFound)
            #expect(try await app.request(.delete, "/v1/me/wishes/\(id)", token: wisher.token).status == .noContent)
            #expect(try await app.request(.delete, "/v1/me/wishes/\(id)", token: wisher.token).status == .notFound)
        }
    }

    @Test func badWishesAreRefusedNamingTheField() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let copy = try await app.offer(owner.token, title: "Ubik", isbn: "9783000000010")
            let wisher = try await app.register()
            try await app.addPin(wisher.token)
            let otherPin = try #require(try await app.addPin(owner.token)["id"] as? String)
            let cases: [([String: any Sendable], HTTPResponse.Status, String)] = [
                // "Exactly one of" is a rule stated in the document's words: 422.
                ([:], .unprocessableContent, "book_id"),
                (["book_id": copy.book, "isbn": "9783000000010"], .unprocessableContent, "book_id"),
                (["book_id": "not-a-uuid"], .badRequest, "book_id"),
                (["book_id": UUID().uuidString], .unprocessableContent, "book_id"),
                (["isbn": "12"], .badRequest, "isbn"),
                (["isbn": "9783000000011"], .unprocessableContent, "isbn"),
                (["isbn": "9783000000027"], .unprocessableContent, "isbn"),
                (["book_id": copy.book, "radius_km": 0], .badRequest, "radius_km"),
                (["book_id": copy.book, "radius_km": 500.5], .badRequest, "radius_km"),
                (["book_id": copy.book, "min_condition": "mint"], .badRequest, "min_condition"),
                (["book_id": copy.book, "pin_id": "home"], .badRequest, "pin_id"),
                (["book_id": copy.book, "pin_id": otherPin], .unprocessableContent, "pin_id"),
            ]
            for (body, status, field) in cases {
                let response = try await app.request(.post, "/v1/me/wishes", json: body, token: wisher.token)
                #expect(response.status == status, "\(body)")
                #expect(response.isProblem)
                #expect(try response.problemFields() == [field], "\(body): \(String(buffer: response.body))")
            }
            #expect((try await app.request(.get, "/v1/me/wishes", token: wisher.token).jsonObject()["data"] as? [Any])?.isEmpty == true)
            // By ISBN, any spelling of it.
            #expect(try await app.request(.post, "/v1/me/wishes", json: ["isbn": "978-3-00-000001-0", "radius_km": 500],
                                          token: wisher.token).status == .created)
        }
    }

    @Test func parallelWishesCannotOvershootTheLimitOf200() async throws {
        try await withApp(configure: { $0.databasePoolSize = 12 }) { app in
            let wisher = try await app.register()
            try await app.addPin(wisher.token)
            let user = try #require(UUID(uuidString: wisher.id))
            // 195 wishes straight into the table, for 195 books.
            try await app.db.query("""
                WITH b AS (
                    INSERT INTO books (title, authors) SELECT 'Book ' || i, ARRAY['Author ' || i] FROM generate_series(1, 195) i
                    RETURNING id, work_key
                )
                INSERT INTO wishes (user_id, book_id, work_key, radius_km, created_at) SELECT \(user), id, work_key, 25, now() FROM b
                """)
            var books: [String] = []
            for _ in 0..<10 {
                let response = try await app.request(.post, "/v1/books", json: ["title": "Parallel \(UUID())", "authors": ["P"]],
                                                     token: wisher.token)
                books.append(try #require(try response.jsonObject()["id"] as? String))
            }
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for book in books {
                    group.addTask { try await app.wish(wisher.token, book: book).status }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == .created }.count == 5, "\(statuses)")
            #expect(statuses.filter { $0 == .unprocessableContent }.count == 5, "\(statuses)")
            let rows = try await app.db.query("SELECT count(*)::int8 FROM wishes WHERE user_id = \(user)")
            for try await count in rows.decode(Int64.self) { #expect(count == 200) }
        }
    }

    @Test func theSameWishSentTwiceAtOnceIsCreatedOnce() async throws {
        try await withApp(configure: { $0.databasePoolSize = 12 }) { app in
            let owner = try await app.register()
            let book = try await app.offer(owner.token, title: "Roadside Picnic").book
            let wisher = try await app.register()
            try await app.addPin(wisher.token)
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for _ in 0..<6 { group.addTask { try await app.wish(wisher.token, book: book).status } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == .created }.count == 1, "\(statuses)")
            #expect(statuses.filter { $0 == .conflict }.count == 5, "\(statuses)")
        }
    }

    @Test func alertPreferenceIsPartOfMyAccount() async throws {
        try await withApp { app in
            let user = try await app.register()
            #expect(try await app.request(.get, "/v1/me", token: user.token).jsonObject()["alerts"] as? String == "daily")
            let off = try await app.request(.patch, "/v1/me", json: ["alerts": "off"], token: user.token)
            #expect(off.status == .ok)
            #expect(try off.jsonObject()["alerts"] as? String == "off")
            let bad = try await app.request(.patch, "/v1/me", json: ["alerts": "hourly"], token: user.token)
            #expect(bad.status == .badRequest)
            #expect(try bad.problemFields() == ["alerts"])
            #expect(try await app.request(.get, "/v1/me", token: user.token).jsonObject()["alerts"] as? String == "off")
        }
    }
}
