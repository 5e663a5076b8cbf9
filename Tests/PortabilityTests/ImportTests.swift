import Foundation
import HummingbirdTesting
import Logging
import PostgresNIO
import Synchronization
import Testing
@testable import BookwormCore
@testable import Portability
@testable import Catalog
@testable import BookwormTestSupport

/// `POST /v1/me/imports`: Goodreads and LibraryThing exports with the quirks real files have.
@Suite struct ImportTests {
    /// A Goodreads export: 7 records on lines 2–9 (the header is line 1; the sixth spans lines 7 and 8).
    static func goodreadsFile() -> Data {
        let rows = [
            TestApp.goodreadsRow(["Book Id": "2767052", "Title": "The Hunger Games (The Hunger Games, #1)", "Author": "Suzanne Collins",
                                  "ISBN": "=\"0439023483\"", "ISBN13": "=\"9780439023481\"", "Date Read": "2012/03/01",
                                  "Exclusive Shelf": "read", "Owned Copies": "1"]),
            TestApp.goodreadsRow(["Book Id": "24280", "Title": "Les Misérables", "Author": "Victor Hugo", "ISBN": "=\"\"",
                                  "ISBN13": "=\"\"", "Exclusive Shelf": "to-read", "Owned Copies": "0"]),
            TestApp.goodreadsRow(["Book Id": "5", "Title": "Bad Checksum", "Author": "Some One", "ISBN13": "=\"9780439023482\"",
                                  "Exclusive Shelf": "read", "Owned Copies": "1"]),
            TestApp.goodreadsRow(["Book Id": "2767052", "Title": "The Hunger Games (The Hunger Games, #1)", "Author": "Suzanne Collins",
                                  "ISBN": "=\"0439023483\"", "ISBN13": "=\"9780439023481\"", "Exclusive Shelf": "read", "Owned Copies": "1"]),
            TestApp.goodreadsRow(["Book Id": "656", "Title": "Война и мир", "Author": "Лев Толстой", "ISBN13": "=\"\"",
                                  "Exclusive Shelf": "currently-reading", "Owned Copies": "2", "Condition": "Like New"]),
            TestApp.goodreadsRow(["Book Id": "77", "Title": "Quoted \"Title\", with\na line break", "Author": "Ann Author",
                                  "Additional Authors": "Bob Second, Cy Third", "Exclusive Shelf": "read", "Owned Copies": "0"]),
            "1,2,3",
        ]
        return Data(([TestApp.goodreadsHeader.joined(separator: ",")] + rows).joined(separator: "\r\n").utf8 + Data("\r\n".utf8))
    }

    @Test func aGoodreadsExportBecomesShelfCopiesAndWishesAndASecondRunCreatesNothing() async throws {
        try await withApp { app in
            let me = try await app.register()
            try await app.addPin(me.token)
            // A book without ISBN someone already listed: the import finds it by its work.
            let other = try await app.register()
            let hugo = try #require((try await app.addCopy(other.token, title: "Les misérables", authors: ["Victor HUGO"])["book"]
                as? [String: Any])?["id"] as? String)

            let id = try await app.importFile(me.token, Self.goodreadsFile(), contentType: "text/csv")
            #expect(try await app.importStatus(me.token, id)["status"] as? String == "queued")
            // Two records per run: progress moves run by run.
            let runner = app.portabilityRunner(chunk: 2, chunksPerRun: 1)
            try await runner.runDue()
            let partway = try await app.importStatus(me.token, id)
            #expect(partway["status"] as? String == "running")
            #expect(partway["total"] as? Int == 7)
            let firstDone = try #require(partway["done"] as? Int)
            #expect(firstDone > 0 && firstDone < 7)
            while try await runner.runDue() > 0 {}

            let status = try await app.importStatus(me.token, id)
            #expect(status["status"] as? String == "done")
            #expect(status["done"] as? Int == 7)
            let created = status["created"] as? [String: Int]
            #expect(created == ["books": 3, "copies": 3, "readings": 4, "wishes": 1])
            #expect(status["skipped"] as? Int == 1)
            let errors = status["errors"] as? [[String: Any]] ?? []
            #expect(errors.compactMap { $0["line"] as? Int } == [4, 9])
            #expect((errors.first?["message"] as? String)?.contains("check digit") == true)

            let shelf = try await app.request(.get, "/v1/me/readings?limit=100", token: me.token).jsonObject()["data"] as? [[String: Any]] ?? []
            let titles = Set(shelf.compactMap { ($0["book"] as? [String: Any])?["title"] as? String })
            #expect(titles == ["The Hunger Games (The Hunger Games, #1)", "Les misérables", "Война и мир", "Quoted \"Title\", with a line break"])
            #expect(shelf.contains { ($0["book"] as? [String: Any])?["id"] as? String == hugo && $0["state"] as? String == "interested" })
            let copies = try await app.request(.get, "/v1/me/copies?limit=100", token: me.token).jsonObject()["data"] as? [[String: Any]] ?? []
            #expect(copies.filter { $0["condition"] as? String == "like_new" }.count == 2)

            // The same file again: nothing twice.
            let again = try await app.importFile(me.token, Self.goodreadsFile(), contentType: "text/csv")
            try await app.runAllJobs()
            let second = try await app.importStatus(me.token, again)
            #expect(second["created"] as? [String: Int] == ["books": 0, "copies": 0, "readings": 0, "wishes": 0])
            #expect(try await app.count("SELECT count(*)::int8 FROM copies WHERE owner_id = $USER", user: me.id) == 3)
        }
    }

    @Test func aLibraryThingExportNamesTheLineOfABookItCannotImport() async throws {
        try await withApp { app in
            let me = try await app.register()
            try await app.addPin(me.token)
            let json = """
                {
                  "101": {
                    "books_id": "101",
                    "title": "The Left Hand of Darkness",
                    "authors": [{"lf": "Le Guin, Ursula K.", "fl": "Ursula K. Le Guin", "role": "Author"}],
                    "isbn": {"0": "0441478123", "2": "9780441478125"},
                    "collections": ["Your library"]
                  },
                  "102": {
                    "books_id": "102",
                    "title": "Kindred",
                    "primaryauthor": "Butler, Octavia E.",
                    "collections": ["Wishlist", "To read"]
                  },
                  "103": {
                    "books_id": "103",
                    "title": "",
                    "collections": ["Your library"]
                  }
                }
                """
            let id = try await app.importFile(me.token, Data(json.utf8), contentType: "application/json")
            try await app.runAllJobs()
            let status = try await app.importStatus(me.token, id)
            #expect(status["status"] as? String == "done")
            #expect(status["created"] as? [String: Int] == ["books": 2, "copies": 1, "readings": 1, "wishes": 1])
            #expect((status["errors"] as? [[String: Any]])?.compactMap { $0["line"] as? Int } == [15])
            let wishes = try await app.request(.get, "/v1/me/wishes", token: me.token).jsonObject()["data"] as? [[String: Any]]
            #expect((wishes?.first?["book"] as? [String: Any])?["authors"] as? [String] == ["Octavia E. Butler"])
        }
    }

    @Test func aRecordTheDatabaseRefusesCostsOnlyItsOwnLine() async throws {
        try await withApp { app in
            let me = try await app.register()
            // A rule of this database alone refuses one copy: the batch fails, record by record goes on.
            try await app.db.query("""
                CREATE FUNCTION refuse_cursed() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN IF NEW.notes = 'cursed' THEN RAISE EXCEPTION 'cursed copy'; END IF; RETURN NEW; END $$
                """)
            try await app.db.query("CREATE TRIGGER refuse_cursed BEFORE INSERT ON copies FOR EACH ROW EXECUTE FUNCTION refuse_cursed()")
            let rows = [
                TestApp.goodreadsRow(["Book Id": "1", "Title": "Fine Book", "Author": "A Writer", "Exclusive Shelf": "read", "Owned Copies": "1"]),
                TestApp.goodreadsRow(["Book Id": "2", "Title": "Cursed Book", "Author": "B Writer", "Exclusive Shelf": "read",
                                      "Owned Copies": "1", "Condition Description": "cursed"]),
                TestApp.goodreadsRow(["Book Id": "3", "Title": "Another Fine Book", "Author": "C Writer", "Owned Copies": "1"]),
            ]
            let file = Data(([TestApp.goodreadsHeader.joined(separator: ",")] + rows).joined(separator: "\n").utf8)
            let id = try await app.importFile(me.token, file, contentType: "text/csv")
            try await app.runAllJobs()
            let status = try await app.importStatus(me.token, id)
            #expect(status["status"] as? String == "done")
            #expect(status["created"] as? [String: Int] == ["books": 2, "copies": 2, "readings": 1, "wishes": 0])
            let errors = status["errors"] as? [[String: Any]] ?? []
            #expect(errors.compactMap { $0["line"] as? Int } == [3])
            #expect((errors.first?["message"] as? String)?.contains("cursed copy") == true)
        }
    }

    @Test func twoImportsOfTheSameWorksAtOnceMakeEachBookOnce() async throws {
        try await withApp { app in
            let first = try await app.register(), second = try await app.register()
            // 30 works without ISBN (found by work key, under a lock per work) and 30 with one (the unique ISBN).
            let rows = (0..<60).map { index in
                TestApp.goodreadsRow(["Book Id": "\(index)", "Title": "Race Work \(index)", "Author": "Racer \(index % 7)",
                                      "ISBN13": index < 30 ? "=\"\"" : "=\"\(ISBN.withCheckDigit("978000000\(String(format: "%03d", index))"))\"",
                                      "Exclusive Shelf": "read", "Owned Copies": "1"])
            }
            let file = Data(([TestApp.goodreadsHeader.joined(separator: ",")] + rows).joined(separator: "\n").utf8)
            let ids = [try await app.importFile(first.token, file, contentType: "text/csv"),
                       try await app.importFile(second.token, file, contentType: "text/csv")]
            // Two workers, chunks of 5: the two imports interleave chunk by chunk.
            let runners = (0..<2).map { _ in
                var runner = app.portabilityRunner(chunk: 5, chunksPerRun: 1)
                runner.batchSize = 1  // one job each: the two imports run side by side
                return runner
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for runner in runners { group.addTask { while try await runner.runDue() > 0 {} } }
                try await group.waitForAll()
            }
            for (account, id) in zip([first, second], ids) {
                let status = try await app.importStatus(account.token, id)
                #expect(status["status"] as? String == "done")
                #expect((status["created"] as? [String: Int])?["copies"] == 60)
            }
            #expect(try await app.count("SELECT count(*)::int8 FROM books WHERE title LIKE 'Race Work %' AND $USER = $USER", user: "x") == 60)
        }
    }

    @Test func tooLargeTooLongForeignOrConcurrentUploadsAreRefused() async throws {
        try await withApp { app in
            let me = try await app.register()
            let big = Data(repeating: 0x41, count: (10 << 20) + 1)
            #expect(try await app.startImport(me.token, big, contentType: "text/csv").status == .contentTooLarge)
            let rows = (0...20_000).map { TestApp.goodreadsRow(["Book Id": "\($0)", "Title": "T\($0)", "Author": "A"]) }
            let long = Data(([TestApp.goodreadsHeader.joined(separator: ",")] + rows).joined(separator: "\n").utf8)
            // The row limit is found when the job reads the file: the import fails, naming it.
            let tooLong = try await app.importFile(me.token, long, contentType: "text/csv")
            try await app.runAllJobs()
            let failed = try await app.importStatus(me.token, tooLong)
            #expect(failed["status"] as? String == "failed")
            #expect(((failed["errors"] as? [[String: Any]])?.first?["message"] as? String)?.contains("more than 20000 rows") == true)
            let foreign = try await app.startImport(me.token, Data("title,author\nA,B\n".utf8), contentType: "text/csv")
            #expect(foreign.status == .unprocessableContent)
            #expect(try foreign.problemFields() == ["file"])
            #expect(try await app.startImport(me.token, Data("x".utf8), contentType: "text/plain").status == .unsupportedMediaType)
            #expect(try await app.startImport(me.token, Data("not a zip".utf8), contentType: "application/zip").status == .unprocessableContent)
            _ = try await app.importFile(me.token, ImportTests.goodreadsFile(), contentType: "text/csv")
            let second = try await app.startImport(me.token, ImportTests.goodreadsFile(), contentType: "text/csv")
            #expect(second.status == .conflict)
            // Someone else's import is not mine to see.
            let other = try await app.register()
            let theirs = try await app.importFile(other.token, ImportTests.goodreadsFile(), contentType: "text/csv")
            #expect(try await app.request(.get, "/v1/me/imports/\(theirs)", token: me.token).status == .notFound)
        }
    }

    /// An upload past the process's burst (4 MiB) is taken at the upload pace: six MiB at 1 MiB/s
    /// waits two seconds of the app's clock, then is stored whole and imported.
    @Test func anUploadPastTheBurstIsTakenAtTheUploadPace() async throws {
        try await withApp(configure: { $0.uploadBytesPerSecond = 1 << 20 }) { app in
            let me = try await app.register()
            let review = String(repeating: "A review read on a train. ", count: 160)
            let rows = (0..<1_600).map { TestApp.goodreadsRow(["Book Id": "\($0)", "Title": "Paced \($0)", "Author": "A", "My Review": review]) }
            let file = Data(([TestApp.goodreadsHeader.joined(separator: ",")] + rows).joined(separator: "\n").utf8)
            #expect(file.count > 6 << 20)
            #expect(app.clock.sleeperCount == 0)
            let finished = Mutex(false)
            let upload = Task {
                defer { finished.withLock { $0 = true } }
                return try await app.startImport(me.token, file, contentType: "text/csv")
            }
            let waited = try await app.clock.advanceWhileAsleep(step: 0.25) { finished.withLock { $0 } }
            let answer = try await upload.value
            #expect(answer.status == .accepted)
            #expect(waited >= Double(file.count - (4 << 20)) / Double(1 << 20) - 0.25)
            let id = try #require(try answer.jsonObject()["id"] as? String)
            try await app.runAllJobs()
            #expect(try await app.importStatus(me.token, id)["status"] as? String == "done")
        }
    }

    /// Each record's work gets its oldest book, read as the first index entry under the work's
    /// key: one row, however many books the work has (on `(work_key, id)` PostgreSQL read and
    /// sorted all of a work's books, or walked the newest-first index through the whole
    /// catalogue; migration 0042).
    @Test func aWorksOldestBookIsOneIndexEntryAwayHoweverManyBooksItHas() async throws {
        let (text, oldest) = try await withTestDatabase { _, client in
            let logger = Logger(label: "test")
            try await client.query("""
                INSERT INTO books (title, authors, created_at)
                SELECT 'Work ' || (n % 200), ARRAY['Some Author'], now() - n * interval '1 minute' FROM generate_series(1, 20000) AS n
                """, logger: logger)
            try await client.query("ANALYZE books", logger: logger)
            let lookup = "SELECT b.id FROM (VALUES (bookworm_work_key('Work 7', ARRAY['Some Author']))) AS k(key) CROSS JOIN LATERAL ("
                + ImportBatch.oldestBookOfWork + ") b"
            var plan = ""
            for try await part in try await client.query(PostgresQuery(unsafeSQL: "EXPLAIN (ANALYZE, FORMAT JSON) " + lookup),
                                                         logger: logger).decode(String.self) { plan += part }
            // The book found is the work's oldest (a lookup that found none would answer null).
            let oldest = try await client.query(PostgresQuery(unsafeSQL: """
                SELECT (\(lookup)) = (SELECT id FROM books WHERE title = 'Work 7' ORDER BY created_at, id LIMIT 1)
                """), logger: logger).decode(Bool?.self).first { _ in true }
            return (plan, oldest ?? nil)
        }
        let plan = try JSONSerialization.jsonObject(with: Data(text.utf8))
        #expect(PlanRows.read("books", in: plan) == 1, "\(plan)")
        #expect(oldest == true)
    }
}
