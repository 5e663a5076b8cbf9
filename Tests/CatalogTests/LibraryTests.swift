import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport


/// Minimal valid headers of each accepted format.
enum SampleImage {
    static let png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) + Data(repeating: 1, count: 64)
    static let jpeg = Data([0xFF, 0xD8, 0xFF, 0xE0]) + Data(repeating: 2, count: 64)
}

@Suite struct LibraryTests {
    @Test func someoneElsesCopyCannotBeChangedDeletedOrPhotographed() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let intruder = try await app.register()
            let copy = try await app.addCopy(owner.token, condition: "good")
            let id = try #require(copy["id"] as? String)
            let patch = try await app.request(.patch, "/v1/copies/\(id)", json: ["condition": "poor"], token: intruder.token)
            #expect(patch.status == .forbidden)
            let delete = try await app.request(.delete, "/v1/copies/\(id)", token: intruder.token)
            #expect(delete.status == .forbidden)
            let photo = try await app.client.executeRequest(uri: "/v1/copies/\(id)/photo", method: .put,
                headers: [.contentType: "image/png", .authorization: "Bearer \(intruder.token)"], body: ByteBuffer(bytes: SampleImage.png))
            #expect(photo.status == .forbidden)
            let after = try await app.request(.get, "/v1/copies/\(id)").jsonObject()
            #expect(after["condition"] as? String == "good")
            #expect(after["photo_url"] is NSNull)
            #expect(after["updated_at"] as? String == copy["updated_at"] as? String)
        }
    }

    @Test func ownerCanPatchAndDelete() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let id = try #require(try await app.addCopy(owner.token)["id"] as? String)
            let patch = try await app.request(.patch, "/v1/copies/\(id)", json: ["status": "traded", "notes": "given to Ann"], token: owner.token)
            #expect(patch.status == .ok)
            #expect(try patch.jsonObject()["status"] as? String == "traded")
            #expect(try await app.page("/v1/copies").ids.isEmpty)
            #expect(try await app.request(.get, "/v1/me/copies", token: owner.token).jsonObject()["data"] as? [Any] != nil)
            #expect(try await app.request(.delete, "/v1/copies/\(id)", token: owner.token).status == .noContent)
            #expect(try await app.request(.get, "/v1/copies/\(id)").status == .notFound)
        }
    }

    /// One prepared statement reads the copy and whether others may see it (`CopyDetailSQL`).
    @Test func aCopyHiddenByReportsOrOfASuspendedOwnerIsShownToItsOwnerOnly() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let reader = try await app.register()
            let id = try #require(try await app.addCopy(owner.token)["id"] as? String)
            let copy = try #require(UUID(uuidString: id))
            func statuses() async throws -> [HTTPResponse.Status] {
                try await app.statuses("/v1/copies/\(id)", tokens: [owner.token, reader.token, nil])
            }
            #expect(try await statuses() == [.ok, .ok, .ok])
            try await app.db.query("UPDATE copies SET hidden_at = now() WHERE id = \(copy)")
            #expect(try await statuses() == [.ok, .notFound, .notFound])
            try await app.db.query("UPDATE copies SET hidden_at = NULL WHERE id = \(copy)")
            try await app.db.query("UPDATE users SET suspended_at = now() WHERE id = (SELECT owner_id FROM copies WHERE id = \(copy))")
            #expect(try await app.request(.get, "/v1/copies/\(id)", token: reader.token).status == .notFound)
            try await app.db.query("UPDATE users SET suspended_at = NULL WHERE id = (SELECT owner_id FROM copies WHERE id = \(copy))")
            #expect(try await statuses() == [.ok, .ok, .ok])
            #expect(try await app.request(.get, "/v1/copies/\(UUID().uuidString)", token: reader.token).status == .notFound)
        }
    }

    @Test func accentlessSearchFindsAccentedAuthorWithPrefixOnLastWord() async throws {
        try await withApp { app in
            let account = try await app.register()
            try await app.addCopy(account.token, title: "Cien años de soledad", authors: ["Gabriel García Márquez"])
            try await app.addCopy(account.token, title: "Unrelated", authors: ["Someone Else"])
            for query in ["garcia marquez", "GARCIA", "gabriel garc", "anos soled", "Márquez"] {
                let found = try await app.page("/v1/copies?q=\(query.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed) ?? "")")
                #expect(found.ids.count == 1, "query \(query)")
            }
            #expect(try await app.page("/v1/copies?q=tolstoy").ids.isEmpty)
            #expect(try await app.request(.get, "/v1/copies?q=%27%3B%20DROP%20TABLE%20copies%3B--").status == .ok)
        }
    }

    @Test func libraryFiltersByISBNAndCondition() async throws {
        try await withApp { app in
            let account = try await app.register()
            try await app.addCopy(account.token, title: "Signals", isbn: "0306406152", condition: "good")
            try await app.addCopy(account.token, title: "Signals", isbn: "9780306406157", condition: "poor")
            try await app.addCopy(account.token, title: "Other", condition: "good")
            #expect(try await app.page("/v1/copies?isbn=0-306-40615-2").ids.count == 2)
            #expect(try await app.page("/v1/copies?isbn=9780306406157&condition=poor").ids.count == 1)
            #expect(try await app.request(.get, "/v1/copies?isbn=123").status == .badRequest)
            #expect(try await app.request(.get, "/v1/copies?condition=mint").status == .badRequest)
        }
    }

    @Test func cursorPagesNeverRepeatOrSkipWhileCopiesArrive() async throws {
        try await withApp { app in
            let account = try await app.register()
            var expected: [String] = []
            for index in 0..<25 { expected.append(try await app.addCopy(account.token, title: "Book \(index)")["id"] as? String ?? "") }
            var seen: [String] = []
            var cursor: String? = nil
            repeat {
                let path = "/v1/copies?limit=7" + (cursor.map { "&cursor=\($0)" } ?? "")
                let page = try await app.page(path)
                seen += page.ids
                cursor = page.next
                try await app.addCopy(account.token, title: "Newer")
            } while cursor != nil
            #expect(seen == expected.reversed())
        }
    }

    @Test func badCursorOrLimitIs400() async throws {
        try await withApp { app in
            for query in ["cursor=not-a-cursor", "cursor=%00%01", "limit=0", "limit=101", "limit=ten"] {
                let response = try await app.request(.get, "/v1/copies?\(query)")
                #expect(response.status == .badRequest, "\(query)")
                #expect(response.isProblem)
            }
        }
    }

    @Test func listPagesAnswer304ForAMatchingETag() async throws {
        try await withApp { app in
            let account = try await app.register()
            try await app.addCopy(account.token)
            let first = try await app.request(.get, "/v1/copies")
            let etag = try #require(first.headers[.eTag])
            #expect(try await app.request(.get, "/v1/copies", headers: [.ifNoneMatch: etag]).status == .notModified)
            try await app.addCopy(account.token)
            #expect(try await app.request(.get, "/v1/copies", headers: [.ifNoneMatch: etag]).status == .ok)
        }
    }

    @Test func userCopiesListsOnlyThatUsersAvailableCopies() async throws {
        try await withApp { app in
            let ann = try await app.register()
            let bob = try await app.register()
            try await app.addCopy(ann.token)
            let withdrawn = try await app.addCopy(ann.token)
            try await app.addCopy(bob.token)
            _ = try await app.request(.patch, "/v1/copies/\(withdrawn["id"] as? String ?? "")", json: ["status": "withdrawn"], token: ann.token)
            #expect(try await app.page("/v1/users/\(ann.username)/copies").ids.count == 1)
            #expect(try await app.request(.get, "/v1/users/nobody_xyz/copies").status == .notFound)
        }
    }

    @Test func blockedEitherWayAViewerFindsNoSuchUsersCopies() async throws {
        try await withApp { app in
            let ann = try await app.register()
            let bob = try await app.register()
            let carol = try await app.register()
            try await app.addCopy(ann.token)
            #expect(try await app.page("/v1/users/\(ann.username)/copies", token: bob.token).ids.count == 1)
            #expect(try await app.request(.put, "/v1/users/\(bob.username)/block", token: ann.token).status == .noContent)
            #expect(try await app.request(.get, "/v1/users/\(ann.username)/copies", token: bob.token).status == .notFound)
            #expect(try await app.request(.get, "/v1/users/\(bob.username)/copies", token: ann.token).status == .notFound)
            // Others, signed in or not, and the owner herself still see the list.
            #expect(try await app.page("/v1/users/\(ann.username)/copies", token: carol.token).ids.count == 1)
            #expect(try await app.page("/v1/users/\(ann.username)/copies").ids.count == 1)
            #expect(try await app.page("/v1/users/\(ann.username)/copies", token: ann.token).ids.count == 1)
            #expect(try await app.request(.delete, "/v1/users/\(bob.username)/block", token: ann.token).status == .noContent)
            #expect(try await app.page("/v1/users/\(ann.username)/copies", token: bob.token).ids.count == 1)
        }
    }
}
