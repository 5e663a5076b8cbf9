import BookwormCore
import PostgresNIO

/// The home feed (`GET /v1/posts` with no kind, author, book or place): the commonest read of
/// the feed, prepared once per pooled connection and run on its generic plan. As an unnamed
/// statement PostgreSQL parsed and planned it on every request, which was half its cost
/// (pgbench ran its text at 3,300 transactions a second simple, 6,500 prepared).
/// Each shape (first page, or after a cursor) is a statement of its own, so that the cursor is
/// an index condition, not a test a generic plan would make of every post from the newest on.
/// `theHomeFeedsGenericPlanReadsOnlyThePage` holds the plans to the page.
extension PostsStore {
    static func isHomeFeed(_ filter: FeedFilter) -> Bool {
        filter.near == nil && filter.kind == nil && filter.author == nil && filter.bookID == nil
    }

    /// `$1`–`$3` (kind, author, book) are unused here; `$7` is the viewer or NULL.
    static func homeFeedText(cursor: Bool) -> String {
        cursor ? homeFeedTexts.after : homeFeedTexts.first
    }

    private static let homeFeedTexts = (first: homeFeedSQL(cursor: false), after: homeFeedSQL(cursor: true))

    private static func homeFeedSQL(cursor: Bool) -> String {
        """
        SELECT \(columns) \(joins)
        WHERE \(cursor ? cursorCondition + " AND " : "")($7::uuid IS NULL OR \(blockCondition))
          AND \(visibleCondition)
        ORDER BY po.created_at DESC, po.id DESC
        LIMIT $6
        """
    }

    func homeFeedRows(cursor: Bool, _ values: [SQLValue], on connection: PostgresConnection?) async throws -> [PostgresRow] {
        cursor
            ? try await client.executeOnGenericPlan(HomeFeedSQL<GridYes>(values: values), on: connection, logger: logger)
            : try await client.executeOnGenericPlan(HomeFeedSQL<GridNo>(values: values), on: connection, logger: logger)
    }
}

/// `PostsStore.homeFeedText` for one shape, prepared. Its parameter types are given because
/// the text leaves the kind, author and book unused.
struct HomeFeedSQL<After: GridFlag>: PreparedSQL {
    static var name: String { After.on ? "bookworm_home_feed_true" : "bookworm_home_feed_false" }
    static var sql: String { PostsStore.homeFeedText(cursor: After.on) }
    static var bindingDataTypes: [PostgresDataType] { [.text, .text, .uuid, .int8, .uuid, .int8, .uuid] }
    let values: [SQLValue]
}
