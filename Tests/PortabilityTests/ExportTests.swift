import Foundation
import HummingbirdTesting
import Logging
import NIOCore
import Testing
import ZIPFoundation
@testable import BookwormApp
@testable import BookwormCore
@testable import Catalog
@testable import Discovery
@testable import Exchange
@testable import Portability
@testable import BookwormTestSupport

/// `POST /v1/me/exports`: a zip of everything of mine, once a day, mine alone, for 72 hours.
@Suite struct ExportTests {
    @Test func anExportHoldsEveryKindAndRestoresIntoAFreshAccount() async throws {
        try await withApp { app in
            let me = try await app.register()
            let phone = String(repeating: "cd", count: 32)
            #expect(try await app.registerDevice(me.token, token: phone, environment: "sandbox").status == .created)
            try await app.addPin(me.token, label: "Home", latitude: 48.8566, longitude: 2.3522)
            try await app.addPin(me.token, label: "Café", latitude: 48.86, longitude: 2.34, kind: "meetup")
            let first = try #require(try await app.addCopy(me.token, title: "Le Petit Prince", authors: ["Antoine de Saint-Exupéry"],
                                                          isbn: "9780156012195")["id"] as? String)
            try await app.db.query("INSERT INTO photos (id, width, height, blurhash) VALUES (repeat('b', 64), 2, 1, 'L00000fQfQfQfQfQfQfQfQfQfQfQ')")
            try await app.db.query("INSERT INTO photo_files VALUES (repeat('b', 64), 'full', 'jpeg', '\\xffd8ffd9')")
            try await app.db.query("UPDATE copies SET photo_id = repeat('b', 64) WHERE id = \(UUID(uuidString: first))")
            try await app.addCopy(me.token, title: "Un livre sans ISBN", authors: ["Anonyme"], condition: "fair")
            let book = try #require((try await app.addCopy(me.token, title: "L'Étranger", authors: ["Albert Camus"])["book"]
                as? [String: Any])?["id"] as? String)
            _ = try await app.request(.put, "/v1/me/readings/\(book)", json: ["state": "finished", "finished_on": "2024-05-01"], token: me.token)
            _ = try await app.wish(me.token, book: book, extra: ["radius_km": 40])

            let started = try await app.request(.post, "/v1/me/exports", token: me.token)
            #expect(started.status == .accepted)
            let id = try #require(try started.jsonObject()["id"] as? String)
            #expect(try await app.request(.post, "/v1/me/exports", token: me.token).status == .tooManyRequests)
            try await app.runAllJobs()
            let status = try await app.request(.get, "/v1/me/exports/\(id)", token: me.token).jsonObject()
            #expect(status["status"] as? String == "done")
            let url = try #require(status["download_url"] as? String)
            let download = try await app.request(.get, url, token: me.token)
            #expect(download.status == .ok)
            #expect(download.headers[.contentType] == "application/zip")
            let zip = Data(download.body.readableBytesView)

            let archive = try Archive(data: zip, accessMode: .read)
            let names = Set(archive.map(\.path))
            #expect(names.isSuperset(of: ["README.txt", "profile.json", "pins.json", "copies.json", "readings.json", "wishes.json",
                                          "trades.json", "posts.json", "blocks.json", "photos/\(String(repeating: "b", count: 64)).jpg"]))
            var devicesJSON = Data()
            _ = try archive.extract(try #require(archive["devices.json"])) { devicesJSON.append($0) }
            let devices = try JSONSerialization.jsonObject(with: devicesJSON) as? [[String: String]]
            #expect(devices?.map { [$0["platform"], $0["environment"], $0["token"]] } == [["apns", "sandbox", phone]])
            var pinsJSON = Data()
            _ = try archive.extract(try #require(archive["pins.json"])) { pinsJSON.append($0) }
            let pins = try JSONSerialization.jsonObject(with: pinsJSON) as? [[String: Any]]
            #expect(pins?.contains { $0["latitude"] as? Double == 48.8566 } == true)  // the exact point: it is mine

            // Nobody else sees it or downloads it.
            let other = try await app.register()
            #expect(try await app.request(.get, "/v1/me/exports/\(id)", token: other.token).status == .notFound)
            #expect(try await app.request(.get, url, token: other.token).status == .notFound)

            // Into a fresh account: pins, copies, readings and wishes come back; twice makes nothing twice.
            let fresh = try await app.register()
            let imported = try await app.importFile(fresh.token, zip, contentType: "application/zip")
            try await app.runAllJobs()
            let report = try await app.importStatus(fresh.token, imported)
            #expect(report["status"] as? String == "done")
            #expect((report["errors"] as? [Any])?.isEmpty == true, "\(report)")
            for table in ["pins WHERE owner_id", "copies WHERE owner_id", "readings WHERE user_id", "wishes WHERE user_id"] {
                let mine = try await app.count("SELECT count(*)::int8 FROM \(table) = $USER", user: me.id)
                let theirs = try await app.count("SELECT count(*)::int8 FROM \(table) = $USER", user: fresh.id)
                #expect(mine == theirs, "\(table)")
            }
            let restored = try await app.request(.get, "/v1/me/pins", token: fresh.token).jsonObject()["data"] as? [[String: Any]]
            #expect(restored?.first { $0["is_default"] as? Bool == true }?["label"] as? String == "Home")
            let again = try await app.importFile(fresh.token, zip, contentType: "application/zip")
            try await app.runAllJobs()
            #expect(try await app.importStatus(fresh.token, again)["created"] as? [String: Int]
                    == ["books": 0, "copies": 0, "readings": 0, "wishes": 0])
            #expect(try await app.count("SELECT count(*)::int8 FROM pins WHERE owner_id = $USER", user: fresh.id) == 2)

            // After 72 hours the archive is gone; a day after the first, a new export may be asked for.
            app.clock.advance(by: 73 * 3600)
            let login = try await app.request(.post, "/v1/auth/login", json: ["login": me.username, "password": me.password])
            let token = try #require(try login.jsonObject()["token"] as? String)
            #expect(try await app.request(.get, url, token: token).status == .gone)
            #expect(try await app.request(.post, "/v1/me/exports", token: token).status == .accepted)
        }
    }

    /// A photo made on upload and one stored before photos were made anew (its remake job not run
    /// yet): the export carries each as the full-size JPEG a viewer downloads, with nothing of the
    /// phone's metadata.
    @Test func anExportCarriesEveryPhotoCleanEvenOneWaitingToBeMadeAnew() async throws {
        try await withApp { app in
            let me = try await app.register()
            let shown = try #require(try await app.addCopy(me.token, title: "Shown")["id"] as? String)
            let put = try await app.client.executeRequest(uri: "/v1/copies/\(shown)/photo", method: .put,
                                                          headers: [.contentType: "image/jpeg", .authorization: "Bearer \(me.token)"],
                                                          body: ByteBuffer(bytes: try TestPictures.phoneJPEG()))
            #expect(put.status == .ok)
            let waiting = try #require(try await app.addCopy(me.token, title: "Waiting")["id"] as? String)
            let old = String(repeating: "e", count: 64), upload = try TestPictures.phoneJPEG(width: 300, height: 100)
            try await app.db.query("INSERT INTO photos (id, content_type, bytes) VALUES (\(old), 'image/jpeg', \(ByteBuffer(bytes: upload)))")
            try await app.db.query("UPDATE copies SET photo_id = \(old) WHERE id = \(UUID(uuidString: waiting))")

            let started = try await app.request(.post, "/v1/me/exports", token: me.token)
            let id = try #require(UUID(uuidString: try started.jsonObject()["id"] as? String ?? ""))
            // The export job alone, as the worker makes it (the remake job would make the upload anew first).
            var config = Config.forTests(app.settings)
            config.clock = app.clock
            let logger = Logger(label: "export-test")
            try await ExportService(client: app.db, readings: ReadingsService(client: app.db, clock: app.clock, logger: logger),
                                    wishes: WishesService(client: app.db, policy: config.wishes, clock: app.clock, logger: logger),
                                    trades: config.tradesService(client: app.db, logger: logger),
                                    photos: PhotosService(client: app.db, maker: nil, settings: config.photos, logger: logger),
                                    clock: app.clock, logger: logger).build(id)

            let status = try await app.request(.get, "/v1/me/exports/\(id.apiString)", token: me.token).jsonObject()
            let download = try await app.request(.get, try #require(status["download_url"] as? String), token: me.token)
            let archive = try Archive(data: Data(download.body.readableBytesView), accessMode: .read)
            let photos = archive.filter { $0.path.hasPrefix("photos/") }
            #expect(photos.count == 2 && !photos.contains { $0.path.contains(old) })
            for entry in photos {
                var jpeg = Data()
                _ = try archive.extract(entry) { jpeg.append($0) }
                #expect(TestPictures.jpegMarkers(jpeg).allSatisfy { ![0xE1, 0xE2, 0xED, 0xFE].contains($0) }, "\(entry.path)")
                #expect(jpeg.range(of: Data("SN-4242".utf8)) == nil)
            }
        }
    }
}
