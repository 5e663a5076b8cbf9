import Accounts
import BookwormCore
import Foundation
import PostgresNIO

/// The library's reads anchored on one book or one owner, prepared once per pooled connection
/// and run on their generic plans, as the plain page is (`PlainLibrarySQL`):
/// - a book's available copies by ISBN (`GET /v1/copies?isbn=`, a barcode scan), with or
///   without `condition`, signed in or out;
/// - one person's copies: their available, shown copies (`/v1/users/{username}/copies`) or
///   every copy of one's own (`/v1/me/copies`).
/// Each has one right plan whatever its values: by the index on (book, newest first) or on
/// (owner, newest first). As unnamed statements PostgreSQL planned them on every request, and
/// for an ISBN planning took three times as long as the run (2.4–3.2 ms against 0.8–0.9 ms,
/// `EXPLAIN ANALYZE` at 1,000,000 copies, 2026-11-26). At that size the book's generic plan reads
/// its copies newest first to the page, where the unnamed statement's plan read all of them and
/// sorted them; in a small table the generic plan does that too. Neither knows how many copies
/// one book has. `theAnchoredGenericPlansReadByTheirAnchorsIndex` holds the plans to their indexes.
/// Any other mix of filters keeps the general statement (`listStatement`).
extension CopiesStore {
    enum Anchor {
        case book(isbn13: String)
        case owner(UUID)
    }

    static func anchor(of filter: CopyFilter) -> Anchor? {
        guard filter.words == nil else { return nil }
        if let isbn = filter.isbn13, filter.ownerID == nil, !filter.includeAllStatuses {
            return .book(isbn13: isbn)
        }
        if let owner = filter.ownerID, filter.isbn13 == nil, filter.condition == nil, filter.viewerID == nil {
            return .owner(owner)
        }
        return nil
    }

    /// `$1`, `$2`: the cursor's position and id (unused on page 1); `$3`: the reader or NULL;
    /// `$4`: the limit; `$5`: the ISBN; `$6`: the condition or NULL. The book is looked up once,
    /// so the copies' index is read by its id.
    static func bookCopiesText(cursor: Bool) -> String { cursor ? bookTexts.after : bookTexts.first }

    private static let bookTexts = (first: bookCopiesSQL(cursor: false), after: bookCopiesSQL(cursor: true))

    private static func bookCopiesSQL(cursor: Bool) -> String {
        """
        SELECT \(columns) \(joins)
        WHERE \(cursor ? afterCursor : "")c.book_id = (SELECT bi.id FROM books bi WHERE bi.isbn13 = $5)
          AND c.status = 'available' AND \(Visibility.shown("c", owner: "owner_id"))
          AND ($6::text IS NULL OR c.condition = $6)
          AND ($3::uuid IS NULL OR \(BlocksStore.noBlockBetween("$3", "c.owner_id")))
        ORDER BY c.created_at DESC, c.id DESC
        LIMIT $4
        """
    }

    /// `$1`, `$2`: the cursor; `$3`: the owner; `$4`: the limit; `$5`: every status (the owner's
    /// own list) or only the available copies others may see.
    static func ownerCopiesText(cursor: Bool) -> String { cursor ? ownerTexts.after : ownerTexts.first }

    private static let ownerTexts = (first: ownerCopiesSQL(cursor: false), after: ownerCopiesSQL(cursor: true))

    private static func ownerCopiesSQL(cursor: Bool) -> String {
        """
        SELECT \(columns) \(joins)
        WHERE \(cursor ? afterCursor : "")c.owner_id = $3
          AND ($5::bool OR (c.status = 'available' AND \(Visibility.shown("c", owner: "owner_id"))))
        ORDER BY c.created_at DESC, c.id DESC
        LIMIT $4
        """
    }

    /// Past the cursor `$1`, `$2` (the plain page's too).
    static let afterCursor = olderThanCursor(micros: "$1", id: "$2") + " AND "

    static func anchoredValues(_ anchor: Anchor, _ filter: CopyFilter, limit: Int, after: Cursor?) -> [SQLValue] {
        let page: [SQLValue] = [.int(after.map { Int($0.micros) }), .uuid(after?.id)]
        switch anchor {
        case .book(let isbn): return page + [.uuid(filter.viewerID), .int(limit), .text(isbn), .text(filter.condition)]
        case .owner(let owner): return page + [.uuid(owner), .int(limit), .bool(filter.includeAllStatuses)]
        }
    }

    func anchoredRows(_ anchor: Anchor, _ filter: CopyFilter, limit: Int, after: Cursor?, on connection: PostgresConnection?)
        async throws -> [PostgresRow]
    {
        let values = Self.anchoredValues(anchor, filter, limit: limit, after: after)
        switch (anchor, after == nil) {
        case (.book, true): return try await client.executeOnGenericPlan(BookCopiesSQL<FirstPage>(values: values), on: connection, logger: logger)
        case (.book, false): return try await client.executeOnGenericPlan(BookCopiesSQL<AfterCursor>(values: values), on: connection, logger: logger)
        case (.owner, true): return try await client.executeOnGenericPlan(OwnerCopiesSQL<FirstPage>(values: values), on: connection, logger: logger)
        case (.owner, false): return try await client.executeOnGenericPlan(OwnerCopiesSQL<AfterCursor>(values: values), on: connection, logger: logger)
        }
    }
}

/// `CopiesStore.bookCopiesText`, prepared (parameter types given: page 1 leaves the cursor's unused).
struct BookCopiesSQL<Page: PageFlag>: PreparedSQL {
    static var name: String { Page.cursor ? "bookworm_book_copies_after" : "bookworm_book_copies_first" }
    static var sql: String { CopiesStore.bookCopiesText(cursor: Page.cursor) }
    static var bindingDataTypes: [PostgresDataType] { [.int8, .uuid, .uuid, .int8, .text, .text] }
    let values: [SQLValue]
}

/// `CopiesStore.ownerCopiesText`, prepared.
struct OwnerCopiesSQL<Page: PageFlag>: PreparedSQL {
    static var name: String { Page.cursor ? "bookworm_owner_copies_after" : "bookworm_owner_copies_first" }
    static var sql: String { CopiesStore.ownerCopiesText(cursor: Page.cursor) }
    static var bindingDataTypes: [PostgresDataType] { [.int8, .uuid, .uuid, .int8, .bool] }
    let values: [SQLValue]
}
