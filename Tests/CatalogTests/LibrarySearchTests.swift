import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Catalog
@testable import BookwormTestSupport

/// A search for common words runs prepared on its generic plan, newest first (`LibrarySearchSQL`),
/// and rare words keep the unnamed statement, as the words' statistics say (`SearchFrequencies`):
/// the prepared shape must give the unnamed statement's pages and read newest first only as far
/// as the page, and the choice must follow the statistics.
@Suite struct LibrarySearchTests {
    private static let logger = Logger(label: "library-search-test")
    private static let searches: [[String]] = [["shadow"], ["quin"], ["shadow", "quin"], ["nunez"], ["zafon", "sha"], ["zzz"], ["s"]]

    @Test func theNewestFirstShapeGivesTheUnnamedStatementsPages() async throws {
        try await withApp { app in
            let viewer = try await Self.seedLibrary(app)
            let store = CopiesStore(client: app.db, logger: Self.logger)
            for words in Self.searches {
                for reader in [nil, viewer] as [UUID?] {
                    var filter = CopyFilter()
                    filter.words = words
                    filter.viewerID = reader
                    var after: Cursor?
                    for page in 0..<3 {
                        let expected = try CopiesStore.views(try await app.db.query(
                            CopiesStore.listStatement(filter, limit: 40, after: after).query, logger: Self.logger).rows)
                        let got = try await store.newestRows(CopiesStore.searchValues(filter, limit: 40, after: after),
                                                             cursor: after != nil, on: nil)
                        #expect(got.map(\.id) == expected.map(\.id), "\(words), viewer \(reader != nil), page \(page)")
                        guard let last = expected.last else { break }
                        after = last.cursor
                    }
                }
            }
        }
    }

    @Test func theNewestFirstGenericPlanReadsOnlyAsFarAsThePage() async throws {
        try await withApp { app in
            // Enough copies for the planner to weigh the index against a sort as it does at scale.
            let viewer = try await Self.seedLibrary(app, copies: 30_000)
            for (reader, cursor) in [(nil, false), (viewer, false), (nil, true), (viewer, true)] as [(UUID?, Bool)] {
                let after = cursor ? Cursor(micros: (1_780_272_000 - 5_000) * 1_000_000, id: UUID()) : nil
                var filter = CopyFilter()
                filter.words = ["shadow"]
                filter.viewerID = reader
                let plan = try await Self.genericPlan(filter, after: after, app: app)
                #expect(plan.indexes.contains("copies_library_idx") && !plan.indexes.contains("copies_search_idx"), "\(plan.indexes)")
                // About two shown copies in five match: the page of 21 is some 50 copies down.
                #expect(plan.read <= 150, "viewer \(reader != nil), cursor \(cursor): \(plan.read) copies read")
            }
        }
    }

    @Test func theShapeFollowsTheWordsStatistics() async throws {
        try await withApp { app in
            let frequencies = SearchFrequencies(clock: SystemClock())
            #expect(await frequencies.estimate(["shadow"], client: app.db, logger: Self.logger) == nil, "no statistics before ANALYZE")
            _ = try await Self.seedLibrary(app)
            // Read again only after `refreshAfter`: a fresh instance sees the new statistics.
            let analysed = SearchFrequencies(clock: SystemClock())
            let common = try #require(await analysed.estimate(["shadow"], client: app.db, logger: Self.logger))
            let rare = try #require(await analysed.estimate(["quin"], client: app.db, logger: Self.logger))
            let absent = try #require(await analysed.estimate(["absent", "zzz"], client: app.db, logger: Self.logger))
            #expect(common.rows >= 2_900 && common.matches > 1_000 && rare.matches < 200 && absent.matches < rare.matches,
                    "\(common) \(rare) \(absent)")
            #expect(LibrarySearchShape.choose(matches: common.matches, rows: common.rows, limit: 21) == .newest)
            #expect(LibrarySearchShape.choose(matches: rare.matches, rows: rare.rows, limit: 21) == .planned)
            let typo = try #require(await analysed.estimate(["zzz"], client: app.db, logger: Self.logger))
            #expect(LibrarySearchShape.choose(matches: typo.matches, rows: typo.rows, limit: 21) == .planned, "\(typo)")
            // A one- or two-letter prefix is taken as common whatever the list says.
            let short = try #require(await analysed.estimate(["qu"], client: app.db, logger: Self.logger))
            #expect(short.matches == short.rows)
        }
    }

    @Test func anUnlistedWordIsRarerThanPostgreSQLAssumesOnlyWhileTheListHasRoom() throws {
        let lexemes = ["shadow", "the"], frequencies = [0.02, 0.5, 0.02, 0.5]
        let roomy = try #require(SearchFrequencies.Figures(lexemes: lexemes, frequencies: frequencies, rows: 1_000_000, listRoom: 1_000))
        let full = try #require(SearchFrequencies.Figures(lexemes: lexemes, frequencies: frequencies, rows: 1_000_000, listRoom: 2))
        #expect(abs(SearchFrequencies.estimate(["zzz"], roomy) - 300) < 1e-6)
        #expect(abs(SearchFrequencies.estimate(["zzz"], full) - 5_000) < 1e-6)  // min(0.005, 0.02 / 2), as PostgreSQL
        #expect(abs(SearchFrequencies.estimate(["the", "shad"], full) - 10_000) < 1e-6)
        #expect(abs(SearchFrequencies.estimate(["Thé", "sha"], roomy) - 10_000) < 1e-6)  // folded like bookworm_fold
        #expect(SearchFrequencies.Figures(lexemes: [], frequencies: [], rows: 1_000_000, listRoom: 1_000) == nil)
        #expect(SearchFrequencies.Figures(lexemes: lexemes, frequencies: frequencies, rows: -1, listRoom: 1_000) == nil)
    }

    @Test func aSearchOverHTTPAnswersAsTheUnnamedStatementDoes() async throws {
        try await withApp { app in
            _ = try await Self.seedLibrary(app)
            for words in Self.searches {
                var filter = CopyFilter()
                filter.words = words
                let expected = try CopiesStore.views(try await app.db.query(
                    CopiesStore.listStatement(filter, limit: 21, after: nil).query, logger: Self.logger).rows).prefix(20).map(\.id.apiString)
                let found = try await app.page("/v1/copies?limit=20&q=" + words.joined(separator: "%20"))
                #expect(found.ids == Array(expected), "\(words)")
            }
        }
    }

    /// `copies` a second apart: about half of a shadow book, one in 120 of a quince book,
    /// a few of both; some withdrawn, hidden, of a suspended owner or of someone `viewer` blocked.
    private static func seedLibrary(_ app: TestApp, copies: Int = 3_000) async throws -> UUID {
        let owner = try #require(UUID(uuidString: try await app.register().id))
        let viewer = try #require(UUID(uuidString: try await app.register().id))
        let blocked = try #require(UUID(uuidString: try await app.register().id))
        let suspended = try #require(UUID(uuidString: try await app.register().id))
        try await app.db.query("""
            INSERT INTO books (title, authors) VALUES
                ('The Shadow of the Wind', ARRAY['Carlos Ruiz Zafón']), ('Quince Season', ARRAY['Ana Núñez']),
                ('Shadow and Quince', ARRAY['Ana Núñez']), ('Other Matters', ARRAY['Someone Else'])
            """)
        try await app.db.query("""
            INSERT INTO copies (owner_id, book_id, condition, notes, status, hidden_at, created_at)
            SELECT CASE WHEN i % 13 = 0 THEN \(blocked) WHEN i % 17 = 0 THEN \(suspended) ELSE \(owner) END,
                   (SELECT id FROM books WHERE title = CASE WHEN i % 200 = 7 THEN 'Quince Season' WHEN i % 300 = 11 THEN 'Shadow and Quince'
                                                            WHEN i % 2 = 0 THEN 'The Shadow of the Wind' ELSE 'Other Matters' END),
                   'good', i::text, CASE WHEN i % 7 = 0 THEN 'withdrawn' ELSE 'available' END,
                   CASE WHEN i % 11 = 0 THEN now() END, timestamptz '2026-06-01' - i * interval '1 second'
            FROM generate_series(1, \(copies)) AS i
            """)
        try await app.db.query("UPDATE users SET suspended_at = now() WHERE id = \(suspended)")
        try await app.db.query("INSERT INTO blocks (blocker_id, blocked_id) VALUES (\(viewer), \(blocked))")
        try await app.db.query("ANALYZE copies")
        try await app.db.query("ANALYZE blocks")
        return viewer
    }

    /// The indexes the prepared search's generic plan reads copies by, and how many copies it read.
    private static func genericPlan(_ filter: CopyFilter, after: Cursor?, app: TestApp) async throws -> (indexes: [String], read: Int) {
        try await app.db.withConnection { connection in
            let plan = try await PlanRows.genericPlan(CopiesStore.searchText(cursor: after != nil), types: "text[], int8, uuid, uuid, int8",
                                                      arguments: PlanRows.literals(CopiesStore.searchValues(filter, limit: 21, after: after)),
                                                      on: connection, logger: Self.logger)
            return (PlanRows.nodes(in: plan).compactMap { $0["Index Name"] as? String }, PlanRows.read("copies", in: plan))
        }
    }
}
