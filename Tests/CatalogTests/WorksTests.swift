import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Catalog
@testable import BookwormTestSupport

/// Editions of one work share a key: title without subtitle, first author, accents and case folded.
@Suite struct WorksTests {
    func book(_ app: TestApp, _ token: String, title: String, authors: [String], isbn: String? = nil) async throws -> String {
        var body: [String: any Sendable] = ["title": title, "authors": authors]
        if let isbn { body["isbn"] = isbn }
        let response = try await app.request(.post, "/v1/books", json: body, token: token)
        guard let id = try response.jsonObject()["id"] as? String else { throw TestFailure("book: \(String(buffer: response.body))") }
        return id
    }

    func editions(_ app: TestApp, of id: String) async throws -> Set<String> {
        let body = try await app.request(.get, "/v1/books/\(id)").jsonObject()
        return Set((body["editions"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String })
    }

    @Test func editionsOfOneWorkListEachOtherAndNothingElse() async throws {
        try await withApp { app in
            let token = try await app.register().token
            let first = try await book(app, token, title: "Der Zauberberg: Roman", authors: ["Thomas Mann"], isbn: "9783000000010")
            let second = try await book(app, token, title: "DER  ZAUBERBERG", authors: ["thomas mann", "Someone Else"], isbn: "9783000000027")
            let third = try await book(app, token, title: "Der Zauberberg", authors: ["Thomas Mann"])
            let otherAuthor = try await book(app, token, title: "Der Zauberberg", authors: ["Klaus Mann"], isbn: "9783000000034")
            let otherTitle = try await book(app, token, title: "Zauberberg-Studien", authors: ["Thomas Mann"], isbn: "9783000000041")
            #expect(try await editions(app, of: first) == [second, third])
            #expect(try await editions(app, of: third) == [first, second])
            #expect(try await editions(app, of: otherAuthor).isEmpty)
            #expect(try await editions(app, of: otherTitle).isEmpty)

            let accented = try await book(app, token, title: "Les Misérables", authors: ["Victor Hugo"])
            let plain = try await book(app, token, title: "les miserables : tome premier", authors: ["VICTOR HUGO"])
            #expect(try await editions(app, of: accented) == [plain])
            // Lists carry no editions: only a single book's page does.
            let list = try await app.request(.get, "/v1/books?limit=100").jsonObject()["data"] as? [[String: Any]] ?? []
            #expect(!list.isEmpty && list.allSatisfy { $0["editions"] == nil })
        }
    }

    @Test func booksStoredBeforeWorksExistedGetTheirKeyToo() async throws {
        try await withApp { app in
            // A row written straight into the table, as an older version of the service did.
            try await app.db.query("INSERT INTO books (title, authors) VALUES ('Effi Briest: Roman', ARRAY['Theodor Fontane'])")
            let keys = try await app.db.query("SELECT work_key FROM books").decode(String.self)
            for try await key in keys { #expect(key == "effi briest|theodor fontane") }
        }
    }
}
