import Foundation
import Testing
@testable import BookwormCore
@testable import Portability
@testable import BookwormTestSupport

/// How an import's file is read: each JSON entry and CSV record within its own budget, a
/// byte-order mark skipped, a file that keeps failing ended, an abandoned upload dropped.
@Suite struct ImportReadingTests {
    static func failure(_ status: [String: Any]) -> String? {
        (status["errors"] as? [[String: Any]])?.first { $0["line"] as? Int == 0 }?["message"] as? String
    }

    @Test func oneJSONEntryPastItsBytesOrValuesIsRefusedBeforeItIsBuilt() throws {
        let budget = ImportBudget(maxElementBytes: 1024, maxElementValues: 100)
        let many = Data(("[[" + Array(repeating: "{}", count: 101).joined(separator: ",") + "]]").utf8)
        let long = Data(("[\"" + String(repeating: "x", count: 1100) + "\"]").utf8)
        var built = 0
        for data in [many, long] {
            #expect(throws: JSONElements.Refused.self) {
                try JSONElements.read(data, maxDepth: 32, maxElements: 10, budget: budget) { _ in built += 1 }
            }
        }
        #expect(built == 0)
        let fits = Data(("[[" + Array(repeating: "{}", count: 40).joined(separator: ",") + "], {\"a\": [1, 2]}]").utf8)
        try JSONElements.read(fits, maxDepth: 32, maxElements: 10, budget: budget) { _ in built += 1 }
        #expect(built == 2)
    }

    @Test func aByteOrderMarkBeforeJSONIsSkipped() throws {
        var keys: [String] = []
        let isObject = try JSONElements.read(Data([0xEF, 0xBB, 0xBF]) + Data(#"{"7": {"title": "T"}}"#.utf8), maxDepth: 32,
                                             maxElements: 10) { keys.append(JSONElements.key($0) ?? "") }
        #expect(isObject && keys == ["7"])
    }

    static func records(_ bytes: [UInt8], maxField: Int = 100) throws -> [(line: Int, fields: [String])] {
        var records: [(line: Int, fields: [String])] = []
        try CSVReader.read(Data(bytes), maxField: maxField) { records.append(($0.line, $0.fields)) }
        return records
    }

    @Test func aCSVIsReadAsExportersWriteIt() throws {
        // A byte-order mark, CRLF, a quoted comma, a doubled quote, a line break in quotes, a
        // blank line, a quote inside an unquoted field, text past a closing quote, no final newline.
        let text = "\u{FEFF}Title,Author\r\n\"Dune, vol. 1\",\"Frank \"\"F\"\" Herbert\"\r\n\"Two\nlines\",Émile Zola\n\nsay \"hi\",\"a\"b\nlast,row"
        let records = try Self.records(Array(text.utf8))
        #expect(records.map(\.line) == [1, 2, 3, 6, 7])
        #expect(records.map(\.fields) == [["Title", "Author"], ["Dune, vol. 1", "Frank \"F\" Herbert"], ["Two\nlines", "Émile Zola"],
                                           ["say \"hi\"", "ab"], ["last", "row"]])
    }

    @Test func aCSVFieldIsMeasuredInCharactersAndMustBeUTF8() throws {
        #expect(try Self.records(Array("ééé,x\n".utf8), maxField: 3).map(\.fields) == [["ééé", "x"]])
        #expect { try Self.records(Array("ok\néééé,x\n".utf8), maxField: 3) } throws: { error in
            (error as? CSVReader.Malformed).map { $0.line == 2 && $0.message.contains("longer than 3") } ?? false
        }
        #expect { try Self.records(Array("ok\nfine,".utf8) + [0xC3, 0x28] + Array("\n".utf8)) } throws: { error in
            (error as? CSVReader.Malformed).map { $0.line == 2 && $0.message == "is not UTF-8 text" } ?? false
        }
        // A byte that is not UTF-8 inside a quoted field is reported on its own line.
        #expect { try Self.records(Array("ok\n\"one\n".utf8) + [0xFF] + Array("\nthree\"\n".utf8)) } throws: { error in
            (error as? CSVReader.Malformed).map { $0.line == 3 && $0.message == "is not UTF-8 text" } ?? false
        }
        #expect(throws: CSVReader.Malformed.self) { try Self.records(Array("a".utf8) + Array(repeating: 0x80, count: 50) + [0x0A], maxField: 3) }
        #expect { try Self.records(Array("a,\"never closed\n".utf8)) } throws: { error in
            (error as? CSVReader.Malformed)?.message == "a quoted field is never closed"
        }
    }

    @Test func importTextKeepsATidyFieldAsItIsAndCleansTheRest() {
        #expect(ImportText.clean("The Left Hand of Darkness", max: 300) == "The Left Hand of Darkness")
        #expect(ImportText.clean("The Left Hand", max: 8) == "The Left")
        #expect(ImportText.clean("  two  spaces\tand\u{7}bell\n", max: 300) == "two spacesandbell")
        #expect(ImportText.clean("Émile\u{200B}  Zola", max: 300) == "Émile Zola")
        #expect(ImportText.trimmed("Dune") == "Dune")
        #expect(ImportText.trimmed(" \tDune\u{00A0}") == "Dune")
        #expect(ImportText.trimmed("") == "")
    }

    @Test func importTextsShortcutsAgreeWithTheLongWayOnAnyText() {
        let pieces = ["a", "Z", "7", " ", "  ", "\t", "\n", "\r\n", "\u{7}", "\u{7F}", "é", "\u{00A0}", "\u{200B}", "-", "\"", "😀"]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5000 {
            let text = (0..<Int.random(in: 0...12, using: &generator)).map { _ in pieces.randomElement(using: &generator) ?? "" }.joined()
            for max in [1, 5, 300] {
                #expect(ImportText.clean(text, max: max) == ImportText.cleanEveryCharacter(text, max: max), "\(text.debugDescription), \(max)")
            }
            #expect(ImportText.trimmed(text) == text.trimmingCharacters(in: .whitespaces), "\(text.debugDescription)")
        }
    }

    @Test func aCSVRecordHoldsAtMostItsFieldCount() throws {
        func record(_ fields: Int) -> Data { Data((Array(repeating: "a", count: fields).joined(separator: ",") + "\n").utf8) }
        var counts: [Int] = []
        try CSVReader.read(record(256), maxField: 10, maxFields: 256) { counts.append($0.fields.count) }
        #expect(counts == [256])
        #expect(throws: CSVReader.Malformed.self) { try CSVReader.read(record(257), maxField: 10, maxFields: 256) { _ in } }
    }

    @Test func aLibraryThingEntryThatIsNotABookIsNamedAndAHugeOneFailsTheImport() async throws {
        try await withApp { app in
            let me = try await app.register()
            try await app.addPin(me.token)
            let book = #"{"books_id": "1", "title": "Kindred", "primaryauthor": "Butler, Octavia E.", "collections": ["Your library"]}"#
            let id = try await app.importFile(me.token, Data([0xEF, 0xBB, 0xBF]) + Data("[\(book),\n\"a string\"]".utf8),
                                              contentType: "application/json")
            try await app.runAllJobs()
            let status = try await app.importStatus(me.token, id)
            #expect(status["status"] as? String == "done")
            #expect((status["created"] as? [String: Int])?["copies"] == 1)
            #expect((status["errors"] as? [[String: Any]])?.compactMap { $0["line"] as? Int } == [2])

            // One entry of a million empty objects: refused while scanning, never built.
            let huge = "[[" + Array(repeating: "{}", count: 1_000_000).joined(separator: ",") + "]]"
            let hugeID = try await app.importFile(me.token, Data(huge.utf8), contentType: "application/json")
            try await app.runAllJobs()
            let refused = try await app.importStatus(me.token, hugeID)
            #expect(refused["status"] as? String == "failed")
            #expect(Self.failure(refused)?.contains("the entry at line 1 is larger than") == true)
        }
    }

    @Test func anImportWhoseRunsKeepFailingEndsFailed() async throws {
        try await withApp { app in
            let me = try await app.register()
            let id = try await app.importFile(me.token, ImportTests.goodreadsFile(), contentType: "text/csv")
            // As if five runs in a row had died (a crash, a killed worker) before finishing.
            try await app.db.query("UPDATE jobs SET attempts = \(ImportJob.maxAttempts) WHERE kind = 'imports.run'")
            try await app.runAllJobs()
            let status = try await app.importStatus(me.token, id)
            #expect(status["status"] as? String == "failed")
            #expect(Self.failure(status)?.contains("stopped 5 times") == true)
            #expect(try await app.count("SELECT count(*) FROM jobs WHERE kind = 'imports.run'", user: me.id) == 0)
        }
    }

    @Test func anUploadIsKeptCompressedWithLZ4() async throws {
        try await withApp { app in
            let me = try await app.register()
            let rows = (0..<300).map { TestApp.goodreadsRow(["Title": "Book \($0)", "Author": "Someone", "Exclusive Shelf": "to-read"]) }
            _ = try await app.importFile(me.token, Data(([TestApp.goodreadsHeader.joined(separator: ",")] + rows).joined(separator: "\n").utf8),
                                         contentType: "text/csv")
            // A PostgreSQL built without lz4 keeps pglz (migration 0038).
            let lz4 = try await app.count("SELECT count(*) FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)", user: me.id)
            #expect(try await app.count("""
                SELECT count(*) FROM import_parts
                WHERE pg_column_compression(bytes) = 'lz4' AND import_id IN (SELECT id FROM imports WHERE user_id = $USER)
                """, user: me.id) == lz4)
        }
    }

    @Test func housekeepingDropsAnUploadItsServerNeverFinished() async throws {
        try await withApp { app in
            let me = try await app.register()
            let id = try await app.importFile(me.token, ImportTests.goodreadsFile(), contentType: "text/csv")
            try await app.db.query("""
                UPDATE imports SET status = 'uploading', created_at = \(app.clock.now()) - interval '61 minutes';
                """)
            try await app.db.query("DELETE FROM jobs WHERE kind = 'imports.run'")
            #expect(try await app.count("SELECT count(*) FROM import_parts", user: me.id) > 0)
            // Housekeeping is a recurring job, first due ten minutes after the runner made its row.
            try await app.runAllJobs()
            app.clock.advance(by: 601)
            try await app.runAllJobs()
            #expect(try await app.request(.get, "/v1/me/imports/\(id)", token: me.token).status == .notFound)
            #expect(try await app.count("SELECT count(*) FROM import_parts", user: me.id) == 0)
        }
    }
}
