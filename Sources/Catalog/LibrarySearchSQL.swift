import Accounts
import BookwormCore
import Logging
import PostgresNIO

/// A library search (`q`, with no `isbn` or `condition`) for words common enough that newest
/// first is their best plan runs prepared on that generic plan (`LibrarySearchSQL`): the copies
/// newest first, each tested against the words, until the page is full. PostgreSQL then does not
/// plan it on every request, as it must the unnamed statement (`listStatement`), whose best plan
/// depends on the words (planning "shadow garc" took 1.0–1.3 ms of a 4.5–5.8 ms request at
/// 1,000,000 copies, 2026-11-26). Rarer words keep the unnamed statement, whose plan reads their
/// index: a generic plan of that shape read every copy at 30,000 (the planner cannot cost the
/// index without the words). Like PostgreSQL's own plan, newest first reads the whole library
/// for words that are each common but never meet. `LibrarySearchTests` holds the shape to the
/// unnamed statement's pages and to its plan.
package enum LibrarySearchShape: String, Sendable {
    case newest
    case planned

    /// Newest first reads about `limit × rows ÷ matches` copies, cheaply (in index order), where
    /// the words' index fetches every match from wherever it lies, about 25 times dearer a copy
    /// (1,000,000 copies, 2026-11-26: 0.4 against 10 µs): the two meet near √(limit × rows × 0.04).
    package static func choose(matches: Double, rows: Double, limit: Int) -> LibrarySearchShape {
        matches * matches <= Double(limit) * rows * 0.04 ? .planned : .newest
    }
}

extension CopiesStore {
    static func isPlainSearch(_ filter: CopyFilter) -> Bool {
        filter.words != nil && hasOnlyWordsOrViewer(filter)
    }

    /// `$1` the words, `$2`, `$3` the cursor's position and id (unused on page 1), `$4` the
    /// viewer or NULL, `$5` the limit. The words are a function call, which no index serves: the
    /// generic plan would read the words' index instead, whose estimate it cannot make without them.
    static func searchText(cursor: Bool) -> String {
        cursor ? searchTexts.after : searchTexts.first
    }

    // Built once: PostgresNIO reads a prepared statement's text on every run.
    private static let searchTexts = (first: searchSQL(cursor: false), after: searchSQL(cursor: true))

    private static func searchSQL(cursor: Bool) -> String {
        let after = cursor ? "AND " + olderThanCursor(micros: "$2", id: "$3") : ""
        // The book and the owner by lateral lookups: the generic plan cannot know the limit,
        // takes a tenth of the candidates for the page, and hash-joined every user for it.
        return """
            SELECT \(columns) FROM (
                SELECT c.* FROM copies c
                WHERE c.status = 'available' \(after) AND ts_match_vq(c.search, (SELECT bookworm_search_query($1)))
                  AND c.hidden_at IS NULL AND \(Visibility.ownerActive("c.owner_id"))
                  AND ($4::uuid IS NULL OR \(BlocksStore.noBlockBetween("$4", "c.owner_id")))
                ORDER BY c.created_at DESC, c.id DESC LIMIT $5) c
            CROSS JOIN LATERAL (SELECT b.id, b.isbn13, b.title, b.authors FROM books b WHERE b.id = c.book_id OFFSET 0) b
            CROSS JOIN LATERAL (SELECT u.id, u.username, u.display_name FROM users u WHERE u.id = c.owner_id OFFSET 0) u
            ORDER BY c.created_at DESC, c.id DESC
            """
    }

    /// The statement a search runs in `shape`, for the benchmark to hand pgbench.
    package static func searchStatement(_ filter: CopyFilter, limit: Int, after: Cursor?, shape: LibrarySearchShape) -> SQLStatement {
        switch shape {
        case .newest: SQLStatement(sql: searchText(cursor: after != nil), values: searchValues(filter, limit: limit, after: after))
        case .planned: listStatement(filter, limit: limit, after: after)
        }
    }

    static func searchValues(_ filter: CopyFilter, limit: Int, after: Cursor?) -> [SQLValue] {
        [.textArray(filter.words), .int(after.map { Int($0.micros) }), .uuid(after?.id), .uuid(filter.viewerID), .int(limit)]
    }

    /// The page by the prepared statement, or nil when the words are rare (or the table has no
    /// statistics yet) and the caller plans the search unnamed.
    func searchViews(_ filter: CopyFilter, limit: Int, after: Cursor?, on connection: PostgresConnection?) async throws
        -> [CopyView]?
    {
        guard let frequencies, let words = filter.words,
              await frequencies.shape(words, limit: limit, client: client, logger: logger) == .newest else { return nil }
        return try await newestRows(Self.searchValues(filter, limit: limit, after: after), cursor: after != nil, on: connection)
    }

    func newestRows(_ values: [SQLValue], cursor: Bool, on connection: PostgresConnection?) async throws -> [CopyView] {
        let rows = cursor
            ? try await client.executeOnGenericPlan(LibrarySearchSQL<AfterCursor>(values: values), on: connection, logger: logger)
            : try await client.executeOnGenericPlan(LibrarySearchSQL<FirstPage>(values: values), on: connection, logger: logger)
        return try Self.views(rows)
    }
}

protocol PageFlag { static var cursor: Bool { get } }
enum FirstPage: PageFlag { static let cursor = false }
enum AfterCursor: PageFlag { static let cursor = true }

/// `CopiesStore.searchText`, prepared. Its parameter types are given because page 1 leaves the
/// cursor's two unused.
struct LibrarySearchSQL<Page: PageFlag>: PreparedSQL {
    static var name: String { Page.cursor ? "bookworm_library_search_after" : "bookworm_library_search_first" }
    static var sql: String { CopiesStore.searchText(cursor: Page.cursor) }
    static var bindingDataTypes: [PostgresDataType] { [.textArray, .int8, .uuid, .uuid, .int8] }
    let values: [SQLValue]
}
