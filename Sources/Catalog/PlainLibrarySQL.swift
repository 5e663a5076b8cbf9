import Accounts
import BookwormCore
import PostgresNIO

/// The plain library (`GET /v1/copies` with no `q`, `isbn` or `condition`): its commonest read,
/// prepared once per pooled connection and run on its generic plan. As an unnamed statement
/// PostgreSQL planned it on every request, and planning cost more than running it (0.65 against
/// 0.51 ms for page 1 of 1,000,000 copies in `EXPLAIN ANALYZE`, 2026-11-26). A search has
/// statements of its own (`LibrarySearchSQL`).
/// Each shape (first page, or after a cursor) is a statement of its own, so that the cursor is
/// an index condition. `thePlainLibrarysGenericPlanReadsOnlyThePage` holds the plans to the page.
extension CopiesStore {
    static func isPlainLibrary(_ filter: CopyFilter) -> Bool {
        filter.words == nil && hasOnlyWordsOrViewer(filter)
    }

    /// The library as anyone sees it, narrowed by nothing but the words (if any) and the reader.
    static func hasOnlyWordsOrViewer(_ filter: CopyFilter) -> Bool {
        filter.isbn13 == nil && filter.condition == nil && filter.ownerID == nil && !filter.includeAllStatuses
    }

    /// `$1`, `$2`: the cursor's position and id (unused on page 1); `$3` the viewer or NULL; `$4` the limit.
    static func plainLibraryText(cursor: Bool) -> String {
        cursor ? plainLibraryTexts.after : plainLibraryTexts.first
    }

    private static let plainLibraryTexts = (first: plainLibrarySQL(cursor: false), after: plainLibrarySQL(cursor: true))

    private static func plainLibrarySQL(cursor: Bool) -> String {
        """
            SELECT \(columns) \(joins)
            WHERE \(cursor ? afterCursor : "")c.status = 'available' AND \(Visibility.shown("c", owner: "owner_id"))
              AND ($3::uuid IS NULL OR \(BlocksStore.noBlockBetween("$3", "c.owner_id")))
            ORDER BY c.created_at DESC, c.id DESC
            LIMIT $4
            """
    }

    static func plainLibraryValues(_ filter: CopyFilter, limit: Int, after: Cursor?) -> [SQLValue] {
        [.int(after.map { Int($0.micros) }), .uuid(after?.id), .uuid(filter.viewerID), .int(limit)]
    }

    func plainLibraryRows(_ filter: CopyFilter, limit: Int, after: Cursor?, on connection: PostgresConnection?) async throws
        -> [PostgresRow]
    {
        let values = Self.plainLibraryValues(filter, limit: limit, after: after)
        return after == nil
            ? try await client.executeOnGenericPlan(PlainLibrarySQL<FirstPage>(values: values), on: connection, logger: logger)
            : try await client.executeOnGenericPlan(PlainLibrarySQL<AfterCursor>(values: values), on: connection, logger: logger)
    }
}

/// `CopiesStore.plainLibraryText` for page 1 or past a cursor, prepared. Its parameter types are
/// given because page 1 leaves the cursor's two unused.
struct PlainLibrarySQL<Page: PageFlag>: PreparedSQL {
    static var name: String { Page.cursor ? "bookworm_plain_library_after" : "bookworm_plain_library_first" }
    static var sql: String { CopiesStore.plainLibraryText(cursor: Page.cursor) }
    static var bindingDataTypes: [PostgresDataType] { [.int8, .uuid, .uuid, .int8] }
    let values: [SQLValue]
}
