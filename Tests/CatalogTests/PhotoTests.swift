import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

extension TestApp {
    func putPhoto(_ copyID: String, _ bytes: Data, type: String, token: String) async throws -> TestResponse {
        try await client.executeRequest(uri: "/v1/copies/\(copyID)/photo", method: .put,
                                        headers: [.contentType: type, .authorization: "Bearer \(token)"],
                                        body: ByteBuffer(bytes: bytes))
    }

    func photoCount() async throws -> Int {
        for try await count in try await db.query("SELECT count(*)::int8 FROM photos").decode(Int.self) { return count }
        return -1
    }
}

@Suite struct PhotoTests {
    @Test func uploadedPhotoIsServedImmutablyWithItsType() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let id = try #require(try await app.addCopy(owner.token)["id"] as? String)
            let put = try await app.putPhoto(id, SampleImage.png, type: "image/png", token: owner.token)
            #expect(put.status == .ok)
            let url = try #require(try put.jsonObject()["photo_url"] as? String)
            let get = try await app.request(.get, url)
            #expect(get.status == .ok)
            #expect(get.headers[.contentType] == "image/png")
            #expect(get.headers[.cacheControl]?.contains("immutable") == true)
            #expect(Data(get.body.readableBytesView) == SampleImage.png)
            let etag = try #require(get.headers[.eTag])
            #expect(try await app.request(.get, url, headers: [.ifNoneMatch: etag]).status == .notModified)
            let copy = try await app.request(.get, "/v1/copies/\(id)").jsonObject()
            #expect(copy["photo_url"] as? String == url)
        }
    }

    @Test func identicalBytesAreStoredOnceAndOrphansAreRemoved() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let first = try #require(try await app.addCopy(owner.token)["id"] as? String)
            let second = try #require(try await app.addCopy(owner.token)["id"] as? String)
            _ = try await app.putPhoto(first, SampleImage.png, type: "image/png", token: owner.token)
            _ = try await app.putPhoto(second, SampleImage.png, type: "image/png", token: owner.token)
            #expect(try await app.photoCount() == 1)
            _ = try await app.putPhoto(first, SampleImage.jpeg, type: "image/jpeg", token: owner.token)
            #expect(try await app.photoCount() == 2)
            _ = try await app.putPhoto(second, SampleImage.jpeg, type: "image/jpeg", token: owner.token)
            #expect(try await app.photoCount() == 1)
            _ = try await app.request(.delete, "/v1/copies/\(first)", token: owner.token)
            #expect(try await app.photoCount() == 1)
            _ = try await app.request(.delete, "/v1/copies/\(second)", token: owner.token)
            #expect(try await app.photoCount() == 0)
        }
    }

    @Test func oversizePhotoIs413() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let id = try #require(try await app.addCopy(owner.token)["id"] as? String)
            let big = SampleImage.jpeg + Data(repeating: 0, count: 5 << 20)
            let response = try await app.putPhoto(id, big, type: "image/jpeg", token: owner.token)
            #expect(response.status == .contentTooLarge)
            #expect(try await app.photoCount() == 0)
        }
    }

    @Test(arguments: [
        ("image/jpeg", Data("just some text, not a picture".utf8)),
        ("image/jpeg", SampleImage.png),
        ("image/gif", Data("GIF89a".utf8) + Data(repeating: 0, count: 16)),
        ("text/plain", SampleImage.png),
    ])
    func fakeOrMislabelledImageIs415(type: String, bytes: Data) async throws {
        try await withApp { app in
            let owner = try await app.register()
            let id = try #require(try await app.addCopy(owner.token)["id"] as? String)
            let response = try await app.putPhoto(id, bytes, type: type, token: owner.token)
            #expect(response.status == .unsupportedMediaType)
            #expect(try await app.photoCount() == 0)
        }
    }

    @Test func unknownPhotoIs404() async throws {
        try await withApp { app in
            let missing = "/v1/photos/" + String(repeating: "a", count: 64)
            let unknown = try await app.request(.get, missing)
            let short = try await app.request(.get, "/v1/photos/short")
            #expect(unknown.status == .notFound)
            #expect(short.status == .notFound)
        }
    }
}
