import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Discovery
@testable import BookwormTestSupport

/// The home feed runs prepared on its generic plan (`HomeFeedSQL`): that plan must read posts
/// newest first and stop at the page, for a reader signed out or in, on page 1 or past a cursor,
/// and the server must run that plan from its first request.
@Suite struct HomeFeedPlanTests {
    private static let logger = Logger(label: "home-feed-plan-test")

    @Test func theHomeFeedsGenericPlanReadsOnlyThePage() async throws {
        try await withApp { app in
            let author = try #require(UUID(uuidString: try await app.register().id))
            let viewer = try #require(UUID(uuidString: try await app.register().id))
            let blocked = try #require(UUID(uuidString: try await app.register().id))
            try await app.db.query("""
                INSERT INTO posts (author_id, kind, body, created_at)
                SELECT CASE WHEN i % 10 = 0 THEN \(blocked) ELSE \(author) END,
                       CASE WHEN i % 2 = 0 THEN 'offer' ELSE 'wanted' END, 'post ' || i,
                       timestamptz '2026-06-01' - i * interval '1 second'
                FROM generate_series(1, 3000) AS i
                """)
            try await app.db.query("INSERT INTO blocks (blocker_id, blocked_id) VALUES (\(viewer), \(blocked))")
            try await app.db.query("ANALYZE posts")
            try await app.db.query("ANALYZE blocks")
            let cursor = Cursor(micros: (1_780_272_000 - 1_500) * 1_000_000, id: UUID())  // halfway down
            for (reader, after) in [(nil, nil), (viewer, nil), (nil, cursor), (viewer, cursor)] as [(UUID?, Cursor?)] {
                var filter = FeedFilter()
                filter.viewerID = reader
                let statement = PostsStore.listStatement(filter, limit: 6, after: after)
                let (read, rows) = try await Self.genericPlanRead(statement, app: app, arguments: [
                    "NULL", "NULL", "NULL", after.map { "\($0.micros)" } ?? "NULL", after.map { "'\($0.id.uuidString)'" } ?? "NULL",
                    "6", reader.map { "'\($0.uuidString)'" } ?? "NULL",
                ])
                #expect(rows == 6)
                #expect(read > 0 && read <= 12, "viewer \(reader != nil), cursor \(after != nil): \(read) posts read")
            }

            let store = PostsStore(client: app.db, logger: Self.logger)
            let plans = try await app.db.transaction(logger: Self.logger) { connection in
                var filter = FeedFilter()
                filter.viewerID = viewer
                let page = try await store.list(filter, limit: 6, after: nil, on: connection)
                let plans = try await PlanRows.preparedPlans(like: "bookworm_home_feed_%", on: connection, logger: Self.logger)
                return page.count == 6 && !page.contains { $0.author.id == blocked } ? plans : []
            }
            #expect(plans.count == 1 && plans.allSatisfy { $0.0 == 1 && $0.1 == 0 }, "\(plans)")
        }
    }

    /// The posts rows `statement`'s generic plan read and the rows it returned, for `arguments`.
    private static func genericPlanRead(_ statement: SQLStatement, app: TestApp, arguments: [String]) async throws -> (Int, Int) {
        try await app.db.withConnection { connection in
            let plan = try await PlanRows.genericPlan(statement.sql, types: "text, text, uuid, int8, uuid, int8, uuid", arguments: arguments,
                                                      on: connection, logger: Self.logger)
            return (PlanRows.read("posts", in: plan), PlanRows.returned(by: plan))
        }
    }
}
