import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Catalog
@testable import BookwormTestSupport

@Suite struct ISBNTests {
    @Test(arguments: [
        ("0-306-40615-2", "9780306406157", "0306406152"),
        ("0 306 40615 2", "9780306406157", "0306406152"),
        ("978-0-306-40615-7", "9780306406157", "0306406152"),
        ("080442957X", "9780804429573", "080442957X"),
        ("0-8044-2957-x", "9780804429573", "080442957X"),
        ("979-10-90636-07-1", "9791090636071", nil),
    ])
    func validISBNsNormaliseToISBN13(raw: String, isbn13: String, isbn10: String?) throws {
        let isbn = try ISBN(raw)
        #expect(isbn.isbn13 == isbn13)
        #expect(isbn.isbn10 == isbn10)
    }

    @Test(arguments: [
        ("0-306-40615-3", ISBN.Problem.checksum),
        ("978-0-306-40615-8", .checksum),
        ("0804429579", .checksum),
        ("977-0-306-40615-7", .prefix),
        ("12345", .shape),
        ("X306406152", .shape),
        ("97803064061X7", .shape),
        ("٩٧٨٠٣٠٦٤٠٦١٥٧", .shape),
    ])
    func invalidISBNsAreRejected(raw: String, problem: ISBN.Problem) {
        #expect(throws: problem) { try ISBN(raw) }
    }
}

@Suite struct CatalogTests {
    func createBook(_ app: TestApp, _ token: String, _ fields: [String: any Sendable]) async throws -> TestResponse {
        try await app.request(.post, "/v1/books", json: fields, token: token)
    }

    @Test func findOrCreateByISBNReturns201ThenTheSameBookWith200() async throws {
        try await withApp { app in
            let account = try await app.register()
            let first = try await createBook(app, account.token, ["isbn": "0-306-40615-2", "title": " Signals ", "authors": ["A. Author"]])
            #expect(first.status == .created)
            let book = try first.jsonObject()
            #expect(book["isbn13"] as? String == "9780306406157")
            #expect(book["isbn10"] as? String == "0306406152")
            #expect(book["title"] as? String == "Signals")
            let again = try await createBook(app, account.token, ["isbn": "9780306406157", "title": "Other title", "authors": ["B"]])
            #expect(again.status == .ok)
            #expect(try again.jsonObject()["id"] as? String == book["id"] as? String)
        }
    }

    @Test func concurrentFindOrCreateYieldsOneBook() async throws {
        try await withApp { app in
            let account = try await app.register()
            let statuses = try await withThrowingTaskGroup(of: (HTTPResponse.Status, String?).self) { group in
                for _ in 0..<12 {
                    group.addTask {
                        let response = try await createBook(app, account.token, ["isbn": "978-1-4028-9462-6", "title": "Same", "authors": ["X"]])
                        return (response.status, try response.jsonObject()["id"] as? String)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0.0 == .created }.count == 1)
            #expect(statuses.allSatisfy { $0.0 == .created || $0.0 == .ok })
            #expect(Set(statuses.map(\.1)).count == 1)
            let rows = try await app.db.query("SELECT count(*)::int8 FROM books")
            for try await count in rows.decode(Int.self) { #expect(count == 1) }
        }
    }

    @Test func aCopyFromAScannedISBNAloneIsOfTheCatalogueBook() async throws {
        try await withApp { app in
            let first = try await app.register(), second = try await app.register()
            let listed = try await app.addCopy(first.token, title: "Dune", authors: ["Frank Herbert"], isbn: "978-0-441-01359-3")
            let book = try #require((listed["book"] as? [String: Any])?["id"] as? String)
            let scanned = try await app.request(.post, "/v1/me/copies", json: ["isbn": "0441013597", "condition": "good"], token: second.token)
            #expect(scanned.status == .created)
            #expect((try scanned.jsonObject()["book"] as? [String: Any])?["id"] as? String == book)
            let unknown = try await app.request(.post, "/v1/me/copies", json: ["isbn": "9780306406157", "condition": "good"], token: second.token)
            #expect(unknown.status == .unprocessableContent)
            #expect(try unknown.jsonObject()["type"] as? String == "https://bookworm.example/problems/unknown_isbn")
            #expect(try unknown.problemFields() == ["isbn"])
            let checksum = try await app.request(.post, "/v1/me/copies", json: ["isbn": "9780441013594", "condition": "good"], token: second.token)
            #expect(checksum.status == .unprocessableContent)
            #expect(try checksum.problemFields() == ["isbn"])
            let shape = try await app.request(.post, "/v1/me/copies", json: ["isbn": "not an isbn", "condition": "good"], token: second.token)
            #expect(shape.status == .badRequest)
            // A blank ISBN is no ISBN: the book must then be described.
            let blank = try await app.request(.post, "/v1/me/copies", json: ["isbn": "  ", "condition": "good"], token: second.token)
            #expect(blank.status == .unprocessableContent)
            #expect(try blank.problemFields() == ["title"])
        }
    }

    @Test func booksWithoutISBNAreAlwaysNew() async throws {
        try await withApp { app in
            let account = try await app.register()
            let first = try await createBook(app, account.token, ["title": "Old Book", "authors": ["Anon"]])
            let second = try await createBook(app, account.token, ["title": "Old Book", "authors": ["Anon"]])
            #expect(first.status == .created && second.status == .created)
            #expect(try first.jsonObject()["id"] as? String != second.jsonObject()["id"] as? String)
        }
    }

    /// Next year is the latest a book may be published, by the service's clock (here in 2040),
    /// not the machine's: for a book made alone and for one described with a copy.
    @Test func thePublicationYearIsBoundedByTheServiceClock() async throws {
        try await withApp { app in
            app.clock.advance(by: Date(timeIntervalSince1970: 2_218_000_000).timeIntervalSince(app.clock.now()))
            let year = Calendar(identifier: .gregorian).component(.year, from: app.clock.now())
            let account = try await app.register()
            let next = try await createBook(app, account.token, ["title": "Soon", "authors": ["A"], "published_year": year + 1])
            #expect(next.status == .created)
            let after = try await createBook(app, account.token, ["title": "Later", "authors": ["A"], "published_year": year + 2])
            #expect(after.status == .unprocessableContent)
            #expect(try after.problemFields() == ["published_year"])
            let copy = try await app.request(.post, "/v1/me/copies", json: [
                "title": "Described", "authors": ["A"], "published_year": year + 1, "condition": "good"], token: account.token)
            #expect(copy.status == .created, "\(String(buffer: copy.body))")
        }
    }

    @Test func bookValidationNamesEveryBadField() async throws {
        try await withApp { app in
            let account = try await app.register()
            let response = try await createBook(app, account.token, [
                "isbn": "0-306-40615-3", "title": "  ", "authors": [String](), "published_year": 99999, "language": "english!"])
            #expect(response.status == .badRequest)
            #expect(Set(try response.problemFields()) == ["title", "authors", "published_year", "language"])
            // A well-formed ISBN with a wrong check digit breaks a rule, not the schema.
            let checksum = try await createBook(app, account.token, ["isbn": "0-306-40615-3", "title": "T", "authors": ["A"]])
            #expect(checksum.status == .unprocessableContent)
            #expect(try checksum.problemFields() == ["isbn"])
        }
    }

    @Test func copyFromISBNCreatesTheBookInTheSameCall() async throws {
        try await withApp { app in
            let account = try await app.register()
            let response = try await app.request(.post, "/v1/me/copies", json: [
                "isbn": "978-0-306-40615-7", "title": "Signals", "authors": ["A. Author"], "condition": "good",
                "notes": "Some pencil marks"], token: account.token)
            #expect(response.status == .created)
            let copy = try response.jsonObject()
            #expect(copy["status"] as? String == "available")
            #expect((copy["book"] as? [String: Any])?["isbn13"] as? String == "9780306406157")
            #expect((copy["owner"] as? [String: Any])?["username"] as? String == account.username)
            #expect((copy["owner"] as? [String: Any])?["email"] == nil)
            let bookID = try #require((copy["book"] as? [String: Any])?["id"] as? String)
            let second = try await app.request(.post, "/v1/me/copies", json: ["book_id": bookID, "condition": "fair"], token: account.token)
            #expect(second.status == .created)
            let book = try await app.request(.get, "/v1/books/\(bookID)").jsonObject()
            #expect(book["available_copies"] as? Int == 2)
            let profile = try await app.request(.get, "/v1/users/\(account.username)").jsonObject()
            #expect(profile["available_copies"] as? Int == 2)
        }
    }

    @Test func copyWritesRejectServerOwnedFields() async throws {
        try await withApp { app in
            let account = try await app.register()
            let other = try await app.register()
            let response = try await app.request(.post, "/v1/me/copies", json: [
                "title": "T", "authors": ["A"], "condition": "good", "owner_id": other.id], token: account.token)
            #expect(response.status == .badRequest)
            #expect(try response.problemFields() == ["owner_id"])
            let copy = try await app.request(.post, "/v1/me/copies", json: ["title": "T", "authors": ["A"], "condition": "good"],
                                             token: account.token).jsonObject()
            let id = try #require(copy["id"] as? String)
            for field in ["id", "created_at", "owner_id"] {
                let patch = try await app.request(.patch, "/v1/copies/\(id)", json: [field: "x"], token: account.token)
                #expect(patch.status == .badRequest)
                #expect(try patch.problemFields() == [field])
            }
        }
    }

    @Test func patchingCopyNotesWithNullClearsThem() async throws {
        try await withApp { app in
            let account = try await app.register()
            let pin = try await app.addPin(account.token)
            let created = try await app.request(.post, "/v1/me/copies", json: [
                "title": "T", "authors": ["A"], "condition": "fair", "notes": "Pencil marks", "pin_id": pin["id"] as? String ?? ""],
                token: account.token).jsonObject()
            let id = try #require(created["id"] as? String)
            // Left out, notes and pin stay; null clears each (the copy then stands at the default pin).
            let condition = try await app.request(.patch, "/v1/copies/\(id)", json: ["condition": "poor"], token: account.token).jsonObject()
            #expect(condition["notes"] as? String == "Pencil marks")
            #expect(condition["pin_id"] as? String == pin["id"] as? String)
            let cleared = try await app.request(.patch, "/v1/copies/\(id)", json: ["notes": NSNull(), "pin_id": NSNull()],
                                                token: account.token)
            #expect(cleared.status == .ok)
            let copy = try cleared.jsonObject()
            #expect(copy["notes"] is NSNull)
            #expect(copy["pin_id"] is NSNull)
            #expect(copy["condition"] as? String == "poor")
            #expect(copy["status"] as? String == "available")
        }
    }

    @Test func patchingCopyConditionOrStatusWithNullIsABadRequestNamingIt() async throws {
        try await withApp { app in
            let account = try await app.register()
            let copy = try await app.addCopy(account.token, condition: "fair")
            let id = try #require(copy["id"] as? String)
            for field in ["condition", "status"] {
                let patch = try await app.request(.patch, "/v1/copies/\(id)", json: [field: NSNull(), "notes": "Kept?"], token: account.token)
                #expect(patch.status == .badRequest)
                #expect(try patch.problemFields() == [field])
            }
            let after = try await app.request(.get, "/v1/copies/\(id)", token: account.token).jsonObject()
            #expect(after["condition"] as? String == "fair")
            #expect(after["status"] as? String == "available")
            #expect(after["notes"] is NSNull)
        }
    }

    @Test func invalidConditionAndStatusAreRejected() async throws {
        try await withApp { app in
            let account = try await app.register()
            let bad = try await app.request(.post, "/v1/me/copies", json: ["title": "T", "authors": ["A"], "condition": "mint"],
                                            token: account.token)
            #expect(try bad.problemFields() == ["condition"])
            let copy = try await app.request(.post, "/v1/me/copies", json: ["title": "T", "authors": ["A"], "condition": "new"],
                                             token: account.token).jsonObject()
            let patch = try await app.request(.patch, "/v1/copies/\(copy["id"] as? String ?? "")", json: ["status": "lost"],
                                              token: account.token)
            #expect(try patch.problemFields() == ["status"])
        }
    }
}
