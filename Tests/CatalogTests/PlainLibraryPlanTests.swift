import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Catalog
@testable import BookwormTestSupport

/// The plain library runs prepared on its generic plan (`PlainLibrarySQL`, a statement for page 1
/// and one past a cursor): that plan must read copies newest first and stop at the page, for a
/// reader signed out or in, on page 1 or past a cursor; the server must run it from its first
/// request, and give the same pages as the unnamed statement it replaced.
@Suite struct PlainLibraryPlanTests {
    private static let logger = Logger(label: "plain-library-plan-test")

    @Test func thePlainLibrarysGenericPlanReadsOnlyThePage() async throws {
        try await withApp { app in
            let (viewer, blocked) = try await Self.seedLibrary(app)
            let cursor = Cursor(micros: (1_780_272_000 - 1_500) * 1_000_000, id: UUID())  // halfway down
            for (reader, after) in [(nil, nil), (viewer, nil), (nil, cursor), (viewer, cursor)] as [(UUID?, Cursor?)] {
                var filter = CopyFilter()
                filter.viewerID = reader
                let values = CopiesStore.plainLibraryValues(filter, limit: 6, after: after)
                let (read, rows) = try await Self.genericPlanRead(CopiesStore.plainLibraryText(cursor: after != nil), values, app: app)
                #expect(rows == 6)
                #expect(read > 0 && read <= 12, "viewer \(reader != nil), cursor \(after != nil): \(read) copies read")
            }

            let store = CopiesStore(client: app.db, logger: Self.logger)
            let plans = try await app.db.transaction(logger: Self.logger) { connection in
                var filter = CopyFilter()
                filter.viewerID = viewer
                let page = try await store.list(filter, limit: 6, after: nil, on: connection)
                let plans = try await PlanRows.preparedPlans(like: "bookworm_plain_library_%", on: connection, logger: Self.logger)
                return page.count == 6 && !page.contains { $0.owner.id == blocked } ? plans : []
            }
            #expect(plans.count == 1 && plans.allSatisfy { $0.0 == 1 && $0.1 == 0 }, "\(plans)")
        }
    }

    @Test func thePlainLibraryPagesMatchTheGeneralStatementsPages() async throws {
        try await withApp { app in
            let (viewer, _) = try await Self.seedLibrary(app)
            let store = CopiesStore(client: app.db, logger: Self.logger)
            try await app.db.query("UPDATE copies SET status = 'withdrawn' WHERE notes::int % 7 = 0")
            try await app.db.query("UPDATE copies SET hidden_at = now() WHERE notes::int % 11 = 0")
            for reader in [nil, viewer] as [UUID?] {
                var filter = CopyFilter()
                filter.viewerID = reader
                var after: Cursor?
                for _ in 0..<4 {
                    let plain = try await store.list(filter, limit: 50, after: after)
                    let general = try CopiesStore.views(try await app.db.query(
                        CopiesStore.listStatement(filter, limit: 50, after: after).query, logger: Self.logger).rows)
                    #expect(plain.count == 50 && plain.map(\.id) == general.map(\.id))
                    after = plain.last?.cursor
                }
            }
        }
    }

    /// 3,000 copies a second apart; every tenth belongs to someone `viewer` blocked.
    private static func seedLibrary(_ app: TestApp) async throws -> (viewer: UUID, blocked: UUID) {
        let owner = try #require(UUID(uuidString: try await app.register().id))
        let viewer = try #require(UUID(uuidString: try await app.register().id))
        let blocked = try #require(UUID(uuidString: try await app.register().id))
        try await app.db.query("INSERT INTO books (title, authors) VALUES ('Plain Library', ARRAY['Someone'])")
        try await app.db.query("""
            INSERT INTO copies (owner_id, book_id, condition, notes, created_at)
            SELECT CASE WHEN i % 10 = 0 THEN \(blocked) ELSE \(owner) END, (SELECT id FROM books LIMIT 1), 'good', i::text,
                   timestamptz '2026-06-01' - i * interval '1 second'
            FROM generate_series(1, 3000) AS i
            """)
        try await app.db.query("INSERT INTO blocks (blocker_id, blocked_id) VALUES (\(viewer), \(blocked))")
        try await app.db.query("ANALYZE copies")
        try await app.db.query("ANALYZE blocks")
        return (viewer, blocked)
    }

    /// The copies rows the generic plan of `text` read and the rows it returned, for `values`.
    private static func genericPlanRead(_ text: String, _ values: [SQLValue], app: TestApp) async throws -> (Int, Int) {
        try await app.db.withConnection { connection in
            let plan = try await PlanRows.genericPlan(text, types: "int8, uuid, uuid, int8", arguments: PlanRows.literals(values),
                                                      on: connection, logger: Self.logger)
            return (PlanRows.read("copies", in: plan), PlanRows.returned(by: plan))
        }
    }
}
