import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Catalog
@testable import BookwormTestSupport

/// How PostgreSQL is asked for a library page. Written as `($n IS NULL OR NOT EXISTS …)`, the
/// block and suspension checks stayed subplans that the planner guessed keep half the rows each;
/// at 5,000,000 copies that made it sort every match of a common word (358 ms) instead of reading
/// newest first until the page was full (6 ms). Top-level checks become anti-joins, which it
/// estimates from the tables.
@Suite struct LibraryPlanTests {
    static let logger = Logger(label: "test")

    @Test func aSignedInSearchChecksBlocksAndSuspensionAsJoinsNotSubplans() async throws {
        var filter = CopyFilter()
        filter.words = ["shadow", "garc"]
        filter.viewerID = UUID()
        let statement = CopiesStore.listStatement(filter, limit: 21, after: Cursor(micros: 1_700_000_000_000_000, id: UUID()))
        #expect(!statement.sql.contains("IS NULL OR"), "only the filters the request has are in the text")
        let text = try await withTestDatabase { _, client in
            try await Self.plan(statement, on: client)
        }
        let plan = try JSONSerialization.jsonObject(with: Data(text.utf8))
        let nodes = PlanRows.nodes(in: plan)
        // A row's photo is looked up for the rows that have one (an output column, not a filter).
        let filters = nodes.filter { $0["Parent Relationship"] as? String == "SubPlan" && $0["Relation Name"] as? String != "photos" }
        #expect(filters.isEmpty, "subplans in \(plan)")
        #expect(nodes.filter { ($0["Join Type"] as? String ?? "").contains("Anti") }.count == 2, "\(nodes.compactMap { $0["Join Type"] })")
    }

    @Test func theOwnersOwnListHasNoVisibilityCheckAtAll() {
        var filter = CopyFilter()
        filter.ownerID = UUID()
        filter.includeAllStatuses = true
        let statement = CopiesStore.listStatement(filter, limit: 21, after: nil)
        #expect(!statement.sql.contains("suspended_at") && !statement.sql.contains("blocks"))
        #expect(statement.values.count == 2)  // the owner and the limit
    }

    static func plan(_ statement: SQLStatement, on client: PostgresClient) async throws -> String {
        var text = ""
        let query = PostgresQuery(unsafeSQL: "EXPLAIN (FORMAT JSON) " + statement.sql, binds: SQLStatement.bindings(statement.values))
        for try await part in try await client.query(query, logger: logger).decode(String.self) { text += part }
        return text
    }
}
