import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Exchange
@testable import Discovery
@testable import BookwormTestSupport

/// The shelf: one reading per user and book, private or public (API.md, Shelf).
@Suite struct ReadingsTests {
    @Test func aReadingIsFoundOrCreatedByISBNThenReplacedAndOthersSeeOnlyPublicOnes() async throws {
        try await withApp { app in
            let reader = try await app.register(), other = try await app.register()
            let created = try await app.request(.post, "/v1/me/readings", json: [
                "isbn": "978-3-00-000001-0", "title": "Der Zauberberg", "authors": ["Thomas Mann"], "state": "reading",
                "started_on": "2026-01-05"], token: reader.token)
            #expect(created.status == .created)
            let reading = try created.jsonObject()
            let book = try #require((reading["book"] as? [String: Any])?["id"] as? String)
            #expect((reading["book"] as? [String: Any])?["isbn13"] as? String == "9783000000010")
            #expect(reading["private"] as? Bool == false && reading["started_on"] as? String == "2026-01-05")

            // The same ISBN again finds the book (no title needed) and replaces the reading.
            let finished = try await app.request(.post, "/v1/me/readings", json: [
                "isbn": "9783000000010", "state": "finished", "started_on": "2026-01-05", "finished_on": "2026-02-01",
                "closing_remark": "Long, and worth it"], token: reader.token)
            #expect(finished.status == .ok)
            #expect(try finished.jsonObject()["closing_remark"] as? String == "Long, and worth it")
            let secret = try await app.request(.post, "/v1/books", json: ["title": "Diary", "authors": ["Me"]], token: reader.token)
            let secretID = try #require(try secret.jsonObject()["id"] as? String)
            let put = try await app.request(.put, "/v1/me/readings/\(secretID)", json: ["state": "interested", "private": true], token: reader.token)
            #expect(put.status == .created)

            let mine = try await app.request(.get, "/v1/me/readings", token: reader.token).jsonObject()["data"] as? [[String: Any]]
            #expect(mine?.count == 2)
            let theirs = try await app.request(.get, "/v1/users/\(reader.username)/readings").jsonObject()["data"] as? [[String: Any]]
            #expect(theirs?.compactMap { ($0["book"] as? [String: Any])?["id"] as? String } == [book])
            let filtered = try await app.request(.get, "/v1/me/readings?state=interested", token: reader.token).jsonObject()["data"] as? [[String: Any]]
            #expect(filtered?.count == 1)
            #expect((try await app.request(.get, "/v1/me/readings", token: other.token).jsonObject()["data"] as? [Any])?.isEmpty == true)

            #expect(try await app.request(.delete, "/v1/me/readings/\(book)", token: reader.token).status == .noContent)
            #expect(try await app.request(.delete, "/v1/me/readings/\(book)", token: reader.token).status == .notFound)
            #expect(try await app.request(.get, "/v1/users/nobody_here/readings").status == .notFound)

            // Blocked either way, a signed-in viewer finds no such shelf; anonymous readers still do.
            let reread = try await app.request(.post, "/v1/me/readings", json: ["isbn": "9783000000010", "state": "finished"],
                                               token: reader.token)
            #expect(reread.status == .created)
            #expect(try await app.request(.put, "/v1/users/\(other.username)/block", token: reader.token).status == .noContent)
            #expect(try await app.request(.get, "/v1/users/\(reader.username)/readings", token: other.token).status == .notFound)
            #expect(try await app.request(.get, "/v1/users/\(reader.username)/readings").status == .ok)
        }
    }

    @Test func badReadingsAreRefusedNamingTheField() async throws {
        try await withApp { app in
            let reader = try await app.register()
            let cases: [([String: any Sendable], HTTPResponse.Status, String)] = [
                (["isbn": "9783000000010", "title": "T", "authors": ["A"], "state": "skimmed"], .badRequest, "state"),
                (["isbn": "12", "title": "T", "authors": ["A"], "state": "reading"], .badRequest, "isbn"),
                (["isbn": "9783000000011", "title": "T", "authors": ["A"], "state": "reading"], .unprocessableContent, "isbn"),
                (["isbn": "9783000000027", "state": "reading"], .unprocessableContent, "title"),
                (["isbn": "9783000000027", "title": "T", "authors": ["A"], "state": "reading", "started_on": "5 May"], .badRequest, "started_on"),
                (["isbn": "9783000000027", "title": "T", "authors": ["A"], "state": "finished", "started_on": "2026-03-02",
                  "finished_on": "2026-03-01"], .unprocessableContent, "finished_on"),
                (["isbn": "9783000000027", "title": "T", "authors": ["A"], "state": "finished",
                  "closing_remark": String(repeating: "x", count: 2001)], .badRequest, "closing_remark"),
            ]
            for (body, status, field) in cases {
                let response = try await app.request(.post, "/v1/me/readings", json: body, token: reader.token)
                #expect(response.status == status, "\(body)")
                #expect(try response.problemFields().contains(field), "\(body): \(String(buffer: response.body))")
            }
            #expect(try await app.request(.put, "/v1/me/readings/\(UUID().uuidString)", json: ["state": "reading"], token: reader.token).status == .notFound)
            let count = try await app.db.query("SELECT count(*)::int8 FROM readings").decode(Int.self)
            for try await readings in count { #expect(readings == 0) }
        }
    }
}

@Suite struct FreeTextTests {
    /// Found by schemathesis: a CR LF after a combining or modifier scalar was not read as a newline.
    @Test func crlfNextToModifiersIsANewlineNotAControlCharacter() throws {
        let text = "\u{0105}\r\n\r\n\r\n\u{1F3FB}\r\n\u{010D}\r\n\r\n"
        #expect(try FeedValidation.body(text, field: "message") == "\u{0105}\n\n\n\u{1F3FB}\n\u{010D}")
        #expect(throws: AppError.self) { try FeedValidation.body("a\rb", field: "message") }
    }
}
