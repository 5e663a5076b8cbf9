import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Catalog
@testable import BookwormTestSupport

/// A book's copies by ISBN and one person's copies run prepared on their generic plans
/// (`BookCopiesSQL`, `OwnerCopiesSQL`): each plan must read its anchor's index, and one person's
/// copies newest first to the page, whatever the values; the server must run them from its first
/// request, and give the same pages as the general statement they replace.
@Suite struct AnchoredLibraryPlanTests {
    private static let logger = Logger(label: "anchored-library-plan-test")
    private static let isbn = "9780306406157"

    @Test func theAnchoredGenericPlansReadByTheirAnchorsIndex() async throws {
        try await withApp { app in
            let library = try await Self.seedLibrary(app)
            let cursor = Cursor(micros: (1_780_272_000 - 1_500) * 1_000_000, id: UUID())  // halfway down
            for after in [nil, cursor] as [Cursor?] {
                for (viewer, condition) in [(nil, nil), (library.viewer, nil), (nil, "new"), (library.viewer, "good")] as [(UUID?, String?)] {
                    var filter = CopyFilter()
                    filter.isbn13 = Self.isbn
                    filter.viewerID = viewer
                    filter.condition = condition
                    let values = CopiesStore.anchoredValues(.book(isbn13: Self.isbn), filter, limit: 6, after: after)
                    let (read, rows, indexes) = try await Self.genericPlanRead(
                        CopiesStore.bookCopiesText(cursor: after != nil), types: "int8, uuid, uuid, int8, text, text", values, app: app)
                    #expect(rows == 6)
                    // By the book's index, never the library's: this small a table has the planner
                    // read the book's copies (few, it guesses, at 5 a book) and sort them, where at
                    // 1,000,000 copies it reads them newest first to the page (README).
                    #expect(indexes == ["copies_book_available_idx"] && read > 0 && read <= library.bookCopies,
                            "book: viewer \(viewer != nil), \(condition ?? "any"), cursor \(after != nil): \(read) read by \(indexes)")
                }
                for everyStatus in [false, true] {
                    var filter = CopyFilter()
                    filter.ownerID = library.owner
                    filter.includeAllStatuses = everyStatus
                    let values = CopiesStore.anchoredValues(.owner(library.owner), filter, limit: 6, after: after)
                    let (read, rows, indexes) = try await Self.genericPlanRead(
                        CopiesStore.ownerCopiesText(cursor: after != nil), types: "int8, uuid, uuid, int8, bool", values, app: app)
                    #expect(rows == 6)
                    #expect(indexes == ["copies_owner_idx"] && read > 0 && read <= 12,
                            "owner: every status \(everyStatus), cursor \(after != nil): \(read) read by \(indexes)")
                }
            }

            let store = CopiesStore(client: app.db, logger: Self.logger)
            let plans = try await app.db.transaction(logger: Self.logger) { connection in
                var book = CopyFilter()
                book.isbn13 = Self.isbn
                book.viewerID = library.viewer
                var mine = CopyFilter()
                mine.ownerID = library.owner
                mine.includeAllStatuses = true
                let books = try await store.list(book, limit: 6, after: nil, on: connection)
                let owned = try await store.list(mine, limit: 6, after: nil, on: connection)
                let plans = try await PlanRows.preparedPlans(like: "bookworm_%_copies_%", on: connection, logger: Self.logger)
                let right = books.count == 6 && !books.contains { $0.owner.id == library.blocked } && owned.allSatisfy { $0.owner.id == library.owner }
                return right && owned.count == 6 ? plans : []
            }
            #expect(plans.count == 2 && plans.allSatisfy { $0.0 == 1 && $0.1 == 0 }, "\(plans)")
        }
    }

    @Test func theAnchoredPagesMatchTheGeneralStatementsPages() async throws {
        try await withApp { app in
            let library = try await Self.seedLibrary(app)
            let store = CopiesStore(client: app.db, logger: Self.logger)
            try await app.db.query("UPDATE copies SET status = 'withdrawn' WHERE notes::int % 7 = 0")
            try await app.db.query("UPDATE copies SET status = 'traded' WHERE notes::int % 13 = 0")
            try await app.db.query("UPDATE copies SET hidden_at = now() WHERE notes::int % 11 = 0")
            var filters: [CopyFilter] = []
            for (viewer, condition) in [(nil, nil), (library.viewer, nil), (nil, "new"), (library.viewer, "good")] as [(UUID?, String?)] {
                var filter = CopyFilter()
                filter.isbn13 = Self.isbn
                filter.viewerID = viewer
                filter.condition = condition
                filters.append(filter)
            }
            for (owner, everyStatus) in [(library.owner, false), (library.owner, true), (library.blocked, false)] {
                var filter = CopyFilter()
                filter.ownerID = owner
                filter.includeAllStatuses = everyStatus
                filters.append(filter)
            }
            #expect(filters.allSatisfy { CopiesStore.anchor(of: $0) != nil })
            for filter in filters {
                var after: Cursor?
                var pages = 0
                repeat {
                    let anchored = try await store.list(filter, limit: 50, after: after)
                    let general = try CopiesStore.views(try await app.db.query(
                        CopiesStore.listStatement(filter, limit: 50, after: after).query, logger: Self.logger).rows)
                    #expect(!anchored.isEmpty && anchored.map(\.id) == general.map(\.id), "\(filter), page \(pages + 1)")
                    after = anchored.count == 50 ? anchored.last?.cursor : nil
                    pages += 1
                } while after != nil && pages < 4
            }
        }
    }

    /// 3,000 copies a second apart: every third of the book with `isbn`, the rest of 600 others;
    /// every tenth of someone `viewer` blocked, the others alternately of `owner` and a third
    /// person; every fourth in condition `new`.
    private static func seedLibrary(_ app: TestApp) async throws -> (owner: UUID, viewer: UUID, blocked: UUID, bookCopies: Int) {
        let owner = try #require(UUID(uuidString: try await app.register().id))
        let other = try #require(UUID(uuidString: try await app.register().id))
        let viewer = try #require(UUID(uuidString: try await app.register().id))
        let blocked = try #require(UUID(uuidString: try await app.register().id))
        try await app.db.query("INSERT INTO books (isbn13, title, authors) VALUES (\(isbn), 'Anchored', ARRAY['Someone'])")
        // Others spread over 600 books, as a catalogue's are: with one other book, the planner
        // would guess that a book holds half the copies, and read the library newest first.
        try await app.db.query("""
            INSERT INTO books (isbn13, title, authors)
            SELECT '979' || lpad(i::text, 10, '0'), 'Elsewhere ' || i, ARRAY['Another'] FROM generate_series(1, 600) AS i
            """)
        try await app.db.query("""
            INSERT INTO copies (owner_id, book_id, condition, notes, created_at)
            SELECT CASE WHEN i % 10 = 0 THEN \(blocked) WHEN i % 2 = 0 THEN \(owner) ELSE \(other) END,
                   (SELECT id FROM books WHERE isbn13 = CASE WHEN i % 3 = 0 THEN \(isbn) ELSE '979' || lpad((i % 600 + 1)::text, 10, '0') END),
                   CASE WHEN i % 4 = 0 THEN 'new' ELSE 'good' END, i::text,
                   timestamptz '2026-06-01' - i * interval '1 second'
            FROM generate_series(1, 3000) AS i
            """)
        try await app.db.query("INSERT INTO blocks (blocker_id, blocked_id) VALUES (\(viewer), \(blocked))")
        try await app.db.query("ANALYZE books")
        try await app.db.query("ANALYZE copies")
        try await app.db.query("ANALYZE blocks")
        return (owner, viewer, blocked, 1_000)
    }

    /// The copies rows the generic plan of `text` read, the rows it returned, and the indexes on
    /// copies it read them by, for `values`.
    private static func genericPlanRead(_ text: String, types: String, _ values: [SQLValue], app: TestApp) async throws
        -> (Int, Int, Set<String>)
    {
        try await app.db.withConnection { connection in
            let plan = try await PlanRows.genericPlan(text, types: types, arguments: PlanRows.literals(values),
                                                      on: connection, logger: Self.logger)
            let indexes = Set(PlanRows.nodes(in: plan).compactMap { $0["Index Name"] as? String }.filter { $0.hasPrefix("copies_") })
            return (PlanRows.read("copies", in: plan), PlanRows.returned(by: plan), indexes)
        }
    }
}
