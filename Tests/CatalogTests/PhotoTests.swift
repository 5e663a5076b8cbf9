import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport
import CVipsProbes
@testable import Catalog

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

    /// A copy of `token`'s with `picture` as its photo; the copy as others see it.
    func copyWithPhoto(_ token: String, _ picture: Data, type: String = "image/jpeg") async throws -> [String: Any] {
        let id = try #require(try await addCopy(token)["id"] as? String)
        let put = try await putPhoto(id, picture, type: type, token: token)
        guard put.status == .ok else { throw TestFailure("photo: \(put.status) \(String(buffer: put.body))") }
        return try await request(.get, "/v1/copies/\(id)").jsonObject()
    }

    func download(_ url: String, webp: Bool = false) async throws -> TestResponse {
        try await request(.get, url, headers: webp ? [.accept: "image/avif,image/webp,*/*"] : [.accept: "image/jpeg,*/*;q=0.8"])
    }
}

/// Photos are decoded and written anew: nothing of the upload's metadata reaches a viewer.
@Suite struct PhotoTests {
    static let secrets = ["Secret", "SN-4242", "BookwormPhone"]

    static func leaksNothing(_ data: Data) -> Bool {
        secrets.allSatisfy { data.range(of: Data($0.utf8)) == nil }
    }

    @Test func aPhonePhotoReachesOthersUprightWithoutPositionSerialOrComments() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let copy = try await app.copyWithPhoto(owner.token, try TestPictures.phoneJPEG())
            let photo = try #require(copy["photo"] as? [String: Any])
            // Stored sideways (400 × 200) with orientation 6: upright it stands 200 × 400.
            #expect(photo["width"] as? Int == 200 && photo["height"] as? Int == 400)
            let urls = try #require(photo["urls"] as? [String: String])
            #expect(copy["photo_url"] as? String == "/v1/photos/\(photo["id"] as? String ?? "")")
            for size in ["thumb", "card", "full"] {
                let url = try #require(urls[size])
                let jpeg = try await app.download(url)
                #expect(jpeg.status == .ok && jpeg.headers[.contentType] == "image/jpeg")
                let jpegBytes = Data(jpeg.body.readableBytesView)
                #expect(Self.leaksNothing(jpegBytes))
                #expect(TestPictures.jpegMarkers(jpegBytes).allSatisfy { ![0xE1, 0xE2, 0xED, 0xFE].contains($0) },
                        "\(TestPictures.jpegMarkers(jpegBytes))")
                let webp = try await app.download(url, webp: true)
                #expect(webp.headers[.contentType] == "image/webp" && webp.headers[.vary] == "Accept")
                let webpBytes = Data(webp.body.readableBytesView)
                #expect(Self.leaksNothing(webpBytes))
                #expect(Set(WebPContainer.chunks(webpBytes)).isDisjoint(with: ["EXIF", "XMP ", "ICCP"]))
                #expect(try TestPictures.size(webpBytes, ext: "webp") == TestPictures.size(jpegBytes, ext: "jpg"))
            }
            let full = Data(try await app.download(try #require(urls["full"])).body.readableBytesView)
            // The stored picture's left (red) half is the upright picture's top.
            let top = try TestPictures.pixel(full, ext: "jpg", x: 100, y: 60), bottom = try TestPictures.pixel(full, ext: "jpg", x: 100, y: 340)
            #expect(top[0] > 150 && top[2] < 80, "top \(top)")
            #expect(bottom[2] > 150 && bottom[0] < 80, "bottom \(bottom)")
        }
    }

    @Test func sizesAreThumbCardAndFullNeverUpscaled() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let big = try TestPictures.convert(TestPictures.ppm(width: 2000, height: 1000), from: "ppm", to: "jpg")
            let small = try TestPictures.convert(TestPictures.ppm(width: 400, height: 200), from: "ppm", to: "png")
            for (picture, type, expected) in [(big, "image/jpeg", [("full", 1600, 800), ("card", 480, 240), ("thumb", 160, 80)]),
                                              (small, "image/png", [("full", 400, 200), ("card", 400, 200), ("thumb", 160, 80)])] {
                let copy = try await app.copyWithPhoto(owner.token, picture, type: type)
                let urls = try #require((copy["photo"] as? [String: Any])?["urls"] as? [String: String])
                for (size, width, height) in expected {
                    let bytes = Data(try await app.download(try #require(urls[size])).body.readableBytesView)
                    #expect(try TestPictures.size(bytes, ext: "jpg") == (width, height), "\(size)")
                    if size == "thumb" { #expect(bytes.count < 8_000) }
                }
            }
        }
    }

    @Test func aPNGsTextAndAnIPhonesHEICComeOutClean() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let png = try await app.copyWithPhoto(owner.token, try TestPictures.pngWithText(), type: "image/png")
            try await Self.expectEveryFileClean(png, app)
            let pngFull = Data(try await app.download(try #require(png["photo_url"] as? String)).body.readableBytesView)
            #expect(try TestPictures.size(pngFull, ext: "jpg") == (300, 300))
            // vips carries the phone's EXIF (GPS, serial) into the HEIC it writes.
            let heic = try TestPictures.convert(try TestPictures.phoneJPEG(width: 640, height: 480), from: "jpg", to: "heic")
            #expect(heic.range(of: Data("SN-4242".utf8)) != nil)
            let fromHEIC = try await app.copyWithPhoto(owner.token, heic, type: "image/heic")
            try await Self.expectEveryFileClean(fromHEIC, app)
            let served = Data(try await app.download(try #require(fromHEIC["photo_url"] as? String)).body.readableBytesView)
            #expect(Self.leaksNothing(served))
            let size = try TestPictures.size(served, ext: "jpg")
            #expect(Set([size.width, size.height]) == [640, 480])
        }
    }

    /// Each of the copy's six files (three sizes, JPEG and WebP) holds none of the secrets and
    /// no metadata segment or chunk.
    static func expectEveryFileClean(_ copy: [String: Any], _ app: TestApp) async throws {
        let urls = try #require((copy["photo"] as? [String: Any])?["urls"] as? [String: String])
        for size in ["thumb", "card", "full"] {
            let jpeg = Data(try await app.download(try #require(urls[size])).body.readableBytesView)
            let webp = Data(try await app.download(try #require(urls[size]), webp: true).body.readableBytesView)
            #expect(leaksNothing(jpeg) && leaksNothing(webp), "\(size)")
            #expect(TestPictures.jpegMarkers(jpeg).allSatisfy { ![0xE1, 0xE2, 0xED, 0xFE].contains($0) }, "\(size)")
            #expect(Set(WebPContainer.chunks(webp)).isDisjoint(with: ["EXIF", "XMP ", "ICCP"]), "\(size)")
        }
    }

    @Test func hostilePicturesGetTheirStatusAndStoreNothing() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let id = try #require(try await app.addCopy(owner.token)["id"] as? String)
            let bomb = try await app.putPhoto(id, TestPictures.pngBomb(), type: "image/png", token: owner.token)
            #expect(bomb.status == .unprocessableContent && String(buffer: bomb.body).contains("image_too_large"))
            let jpeg = try TestPictures.phoneJPEG()
            let truncated = try await app.putPhoto(id, jpeg.prefix(jpeg.count / 2), type: "image/jpeg", token: owner.token)
            #expect(truncated.status == .unprocessableContent && String(buffer: truncated.body).contains("image_unreadable"))
            let gif = try TestPictures.convert(TestPictures.ppm(width: 40, height: 40), from: "ppm", to: "gif")
            #expect(try await app.putPhoto(id, gif, type: "image/jpeg", token: owner.token).status == .unsupportedMediaType)
            #expect(try await app.putPhoto(id, gif, type: "image/gif", token: owner.token).status == .unsupportedMediaType)
            #expect(try await app.putPhoto(id, Data("just text".utf8), type: "image/jpeg", token: owner.token).status == .unsupportedMediaType)
            let big = jpeg + Data(repeating: 0, count: 10 << 20)
            #expect(try await app.putPhoto(id, big, type: "image/jpeg", token: owner.token).status == .contentTooLarge)
            #expect(try await app.photoCount() == 0)
        }
    }

    @Test func aDisplayP3PhotoIsConvertedToSRGBNotRelabelled() async throws {
        try await withApp { app in
            let owner = try await app.register()
            // sRGB (30, 200, 30) is about (96, 197, 67) in Display P3: relabelled, it would come out that dull.
            let copy = try await app.copyWithPhoto(owner.token, try TestPictures.displayP3JPEG(TestPictures.RGB(r: 30, g: 200, b: 30)))
            let full = Data(try await app.download(try #require(copy["photo_url"] as? String)).body.readableBytesView)
            let colour = try TestPictures.pixel(full, ext: "jpg", x: 32, y: 32)
            #expect(colour[0] < 60 && colour[1] > 180 && colour[2] < 55, "\(colour)")
        }
    }

    @Test func aStripOfPixelsIsAPictureNotAServerError() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let strip = try TestPictures.made("png", "black", "OUT", "4000", "3", "--bands", "3")
            let copy = try await app.copyWithPhoto(owner.token, strip, type: "image/png")
            let urls = try #require((copy["photo"] as? [String: Any])?["urls"] as? [String: String])
            let thumb = Data(try await app.download(try #require(urls["thumb"])).body.readableBytesView)
            #expect(try TestPictures.size(thumb, ext: "jpg") == (160, 1))
        }
    }

    @Test func anAnimatedPictureKeepsItsFirstFrame() async throws {
        try await withApp { app in
            let owner = try await app.register()
            var length = 0
            let pointer = try #require(bw_probe_animated_webp(&length))
            defer { bw_probe_free(pointer) }
            let copy = try await app.copyWithPhoto(owner.token, Data(bytes: pointer, count: length), type: "image/webp")
            let full = Data(try await app.download(try #require(copy["photo_url"] as? String)).body.readableBytesView)
            #expect(try TestPictures.size(full, ext: "jpg") == (40, 30))
            let colour = try TestPictures.pixel(full, ext: "jpg", x: 20, y: 15)
            #expect(colour[0] > 150 && colour[1] < 80 && colour[2] < 80, "\(colour)")
        }
    }

    @Test func theBlurhashDecodesToThePicturesColours() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let copy = try await app.copyWithPhoto(owner.token, try TestPictures.phoneJPEG())
            let hash = try #require((copy["photo"] as? [String: Any])?["blurhash"] as? String)
            // An independent decoder (PyPI's blurhash), 1 × 8 pixels: red above, blue below.
            guard let python = ProcessInfo.processInfo.environment["BOOKWORM_BROWSER_PYTHON"] else {
                throw TestFailure("BOOKWORM_BROWSER_PYTHON is not set to a Python with blurhash: run the tests with `make test`")
            }
            let output = try TestPictures.tool(python, "-c", "import blurhash, json, sys; print(json.dumps(blurhash.decode(sys.argv[1], 1, 8)))", hash)
            let rows = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [[[Double]]])
            let top = rows[0][0], bottom = rows[7][0]
            #expect(top[0] > top[2] + 60, "\(rows)")
            #expect(bottom[2] > bottom[0] + 60, "\(rows)")
        }
    }

    @Test func servingNegotiatesTheFormatAndCachesEachVariantForever() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let copy = try await app.copyWithPhoto(owner.token, try TestPictures.phoneJPEG())
            let url = try #require(copy["photo_url"] as? String)
            let jpeg = try await app.download(url), webp = try await app.download(url, webp: true)
            #expect(jpeg.headers[.cacheControl]?.contains("immutable") == true)
            let jpegTag = try #require(jpeg.headers[.eTag]), webpTag = try #require(webp.headers[.eTag])
            #expect(jpegTag != webpTag)
            #expect(try await app.request(.get, url, headers: [.ifNoneMatch: jpegTag]).status == .notModified)
            #expect(try await app.request(.get, url, headers: [.accept: "image/webp;q=0"]).headers[.contentType] == "image/jpeg")
            let unknown = try await app.request(.get, url + "?size=huge")
            let fields = try unknown.problemFields()
            #expect(unknown.status == .badRequest && fields == ["size"])
            #expect(try await app.request(.get, "/v1/photos/" + String(repeating: "a", count: 64)).status == .notFound)
            #expect(try await app.request(.get, "/v1/photos/short").status == .notFound)
        }
    }

    @Test func theSamePictureIsStoredOnceAndOrphansAreRemoved() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let one = try TestPictures.convert(TestPictures.ppm(width: 64, height: 64), from: "ppm", to: "png")
            let other = try TestPictures.convert(TestPictures.ppm(width: 64, height: 64, left: TestPictures.blue, right: TestPictures.red),
                                                 from: "ppm", to: "png")
            let first = try #require(try await app.addCopy(owner.token)["id"] as? String)
            let second = try #require(try await app.addCopy(owner.token)["id"] as? String)
            _ = try await app.putPhoto(first, one, type: "image/png", token: owner.token)
            _ = try await app.putPhoto(second, one, type: "image/png", token: owner.token)
            #expect(try await app.photoCount() == 1)
            _ = try await app.putPhoto(first, other, type: "image/png", token: owner.token)
            #expect(try await app.photoCount() == 2)
            _ = try await app.putPhoto(second, other, type: "image/png", token: owner.token)
            #expect(try await app.photoCount() == 1)
            _ = try await app.request(.delete, "/v1/copies/\(first)", token: owner.token)
            _ = try await app.request(.delete, "/v1/copies/\(second)", token: owner.token)
            #expect(try await app.photoCount() == 0)
            #expect(try await app.count("SELECT count(*) FROM photo_files", user: owner.id) == 0)
        }
    }

    /// Uploads stored as they came, before photos were made anew, are made anew by the
    /// `photos.remake` job (or when first asked for) and never served as they came.
    @Test func storedUploadsAreRemadeAndTheirPositionIsGone() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let phone = try TestPictures.phoneJPEG()
            let first = try #require(try await app.addCopy(owner.token)["id"] as? String)
            let second = try #require(try await app.addCopy(owner.token)["id"] as? String)
            let third = try #require(try await app.addCopy(owner.token)["id"] as? String)
            for (id, bytes, old) in [(first, phone, String(repeating: "c", count: 64)), (second, Data("not a picture".utf8), String(repeating: "d", count: 64)),
                                     (third, try TestPictures.phoneJPEG(width: 300, height: 100), String(repeating: "e", count: 64))] {
                try await app.db.query("INSERT INTO photos (id, content_type, bytes) VALUES (\(old), 'image/jpeg', \(ByteBuffer(bytes: bytes)))")
                try await app.db.query("UPDATE copies SET photo_id = \(old) WHERE id = \(UUID(uuidString: id))")
            }
            let before = try await app.request(.get, "/v1/copies/\(first)").jsonObject()
            #expect(before["photo"] is NSNull)
            // Asked for before the job ran: made now, never served as stored.
            let early = Data(try await app.download(try #require(before["photo_url"] as? String)).body.readableBytesView)
            #expect(Self.leaksNothing(early) && TestPictures.jpegMarkers(early).allSatisfy { $0 != 0xE1 })
            try await app.runAllJobs()
            let after = try await app.request(.get, "/v1/copies/\(first)").jsonObject()
            let photo = try #require(after["photo"] as? [String: Any])
            #expect(photo["height"] as? Int == 400)
            let full = Data(try await app.download(try #require((photo["urls"] as? [String: String])?["full"])).body.readableBytesView)
            #expect(Self.leaksNothing(full))
            let unreadable = try await app.request(.get, "/v1/copies/\(second)").jsonObject()
            #expect(unreadable["photo_url"] is NSNull && unreadable["photo"] is NSNull)
            // Remade by the job alone: upright, clean.
            let byJob = try #require(try await app.request(.get, "/v1/copies/\(third)").jsonObject()["photo"] as? [String: Any])
            #expect(byJob["width"] as? Int == 100 && byJob["height"] as? Int == 300)
            let jobFull = Data(try await app.download(try #require((byJob["urls"] as? [String: String])?["full"])).body.readableBytesView)
            #expect(Self.leaksNothing(jobFull))
            #expect(try await app.count("SELECT count(*) FROM photos WHERE bytes IS NOT NULL", user: owner.id) == 0)
            #expect(try await app.photoCount() == 2)
        }
    }
}
