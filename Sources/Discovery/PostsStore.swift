import Accounts
import BookwormCore
import Catalog
import Foundation
import Logging
import Places
import PostgresNIO

/// SQL for posts. Every feed page is one statement, whatever its length: authors and books are
/// joined in, and the nearby feed's distance comes from the same statement.
package struct PostsStore: Sendable {
    package let client: Database
    package let logger: Logger

    package init(client: Database, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    package static let columns = """
        po.id, po.kind, po.body, po.copy_id, po.created_at,
        (EXTRACT(EPOCH FROM po.created_at) * 1000000)::int8,
        u.id, u.username, u.display_name, b.id, b.isbn13, b.title, b.authors
        """
    package static let joins = "FROM posts po JOIN users u ON u.id = po.author_id LEFT JOIN books b ON b.id = po.book_id"

    package typealias Row = (UUID, String, String, UUID?, Date, Int64, UUID, String, String?, UUID?, String?, String?, [String]?)

    /// Column by column with concrete types: decoding the tuple through PostgresNIO's generic
    /// parameter pack cost a tenth of a feed request's CPU.
    static func row(_ cells: inout RowCells) throws -> Row {
        (try cells.next(UUID.self), try cells.next(String.self), try cells.next(String.self),
         try cells.next(UUID?.self), try cells.next(Date.self), try cells.next(Int64.self),
         try cells.next(UUID.self), try cells.next(String.self), try cells.next(String?.self),
         try cells.next(UUID?.self), try cells.next(String?.self), try cells.next(String?.self),
         try cells.next([String]?.self))
    }

    package static func view(_ row: Row, distance: Double? = nil) -> PostView {
        var book: BookSummary?
        if let id = row.9, let title = row.11 {
            book = BookSummary(id: id, isbn13: row.10, title: title, authors: row.12 ?? [])
        }
        return PostView(id: row.0, kind: row.1, body: row.2,
                        author: OwnerSummary(id: row.6, username: row.7, displayName: row.8),
                        book: book, copyID: row.3, createdAt: row.4, distanceKm: distance, createdMicros: row.5)
    }

    package func get(_ id: UUID, connection: PostgresConnection? = nil) async throws -> PostView? {
        let query: PostgresQuery = "SELECT \(unescaped: Self.columns) \(unescaped: Self.joins) WHERE po.id = \(id)"
        let rows = try await client.query(query, on: connection, logger: logger)
        for try await row in rows.decode(Row.self) { return Self.view(row) }
        return nil
    }

    /// The post and whether others may see it (not hidden by reports, author not suspended), in
    /// one prepared statement, as a copy's page reads its copy (`CopiesStore.detail`).
    func detail(_ id: UUID) async throws -> (post: PostView, shown: Bool)? {
        guard let row = try await client.execute(PostDetailSQL(values: [.uuid(id)]), logger: logger).first else { return nil }
        var cells = RowCells(row)
        let detail = (Self.view(try Self.row(&cells)), try cells.next(Bool.self))
        try cells.end()
        return detail
    }

    /// The posts among `ids` that `author` wrote (delta sync).
    package func authored(_ ids: [UUID], author: UUID) async throws -> [UUID: PostView] {
        guard !ids.isEmpty else { return [:] }
        let query: PostgresQuery = "SELECT \(unescaped: Self.columns) \(unescaped: Self.joins) WHERE po.id = ANY(\(ids)) AND po.author_id = \(author)"
        var views: [UUID: PostView] = [:]
        for try await row in try await client.query(query, logger: logger).decode(Row.self) { views[row.0] = Self.view(row) }
        return views
    }

    /// Newest first by keyset over (created_at, id).
    package func list(_ filter: FeedFilter, limit: Int, after: Cursor?, on connection: PostgresConnection? = nil) async throws -> [PostView] {
        let (statement, grid) = Self.listPlan(filter, limit: limit, after: after)
        var collected: [PostView] = []
        func add(_ row: PostgresRow) throws {
            var cells = RowCells(row)
            let post = try Self.row(&cells)
            collected.append(Self.view(post, distance: filter.near == nil ? nil : try cells.next(Double.self)))
            try cells.end()
        }
        if let grid {
            for row in try await gridRows(grid, statement.values, on: connection) { try add(row) }
        } else if Self.isHomeFeed(filter) {
            for row in try await homeFeedRows(cursor: after != nil, statement.values, on: connection) { try add(row) }
        } else {
            for try await row in try await client.query(statement.query, on: connection, logger: logger) { try add(row) }
        }
        return collected
    }

    /// The filters take `$1`–`$7`; a location adds the nearby parameters after them. Built as
    /// text plus values so the benchmark can hand the identical SQL to pgbench.
    package static func listStatement(_ filter: FeedFilter, limit: Int, after: Cursor?) -> SQLStatement {
        listPlan(filter, limit: limit, after: after).statement
    }

    /// The statement, and the grid shape it was made for when it is one of the prepared grid reads.
    package static func listPlan(_ filter: FeedFilter, limit: Int, after: Cursor?) -> (statement: SQLStatement, grid: FeedGridShape?) {
        let filters = filterValues(filter, limit: limit, after: after)
        guard let near = filter.near else {
            if isHomeFeed(filter) { return (SQLStatement(sql: homeFeedText(cursor: after != nil), values: filters), nil) }
            return (SQLStatement(sql: """
                SELECT \(columns) \(joins)
                WHERE \(conditions)
                ORDER BY po.created_at DESC, po.id DESC
                LIMIT $6
                """, values: filters), nil)
        }
        return nearbyStatement(filter, after: after, near: near, filters: filters)
    }

    static func filterValues(_ filter: FeedFilter, limit: Int, after: Cursor?) -> [SQLValue] {
        [.text(filter.kind?.rawValue), .text(filter.author?.lowercased()), .uuid(filter.bookID),
         .int(after.map { Int($0.micros) }), .uuid(after?.id), .int(limit), .uuid(filter.viewerID)]
    }

    static let kindCondition = "po.kind = $1"
    static let cursorCondition = "(po.created_at, po.id) < (timestamptz 'epoch' + $4 * interval '1 microsecond', $5)"
    static let blockCondition = BlocksStore.noBlockBetween("$7", "po.author_id")
    static let visibleCondition = "(po.author_id = $7 OR (\(Visibility.shown("po", owner: "author_id"))))"

    /// Kind, author, book, keyset position, blocks and visibility, over `$1`–`$7`; a filter that
    /// is NULL is skipped by its `IS NULL` test, so one text serves every request.
    static let conditions = """
        ($1::text IS NULL OR \(kindCondition))
          AND ($2::text IS NULL OR po.author_id = (SELECT id FROM users WHERE lower(username) = $2))
          AND ($3::uuid IS NULL OR po.book_id = $3)
          AND ($4::int8 IS NULL OR \(cursorCondition))
          AND ($7::uuid IS NULL OR \(blockCondition))
          AND \(visibleCondition)
        """

    // MARK: - Writing

    func isDuplicate(authorID: UUID, body: String, within seconds: TimeInterval, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query("""
            SELECT 1 FROM posts
            WHERE author_id = \(authorID) AND body = \(body)
              AND created_at > clock_timestamp() - make_interval(secs => \(seconds))
            LIMIT 1
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// The copy's owner and book, when the copy exists.
    func copyOwnerAndBook(_ copyID: UUID, on connection: PostgresConnection) async throws -> (owner: UUID, book: UUID)? {
        let rows = try await connection.query("SELECT owner_id, book_id FROM copies WHERE id = \(copyID)", logger: logger)
        for try await (owner, book) in rows.decode((UUID, UUID).self) { return (owner, book) }
        return nil
    }

    func bookExists(_ bookID: UUID, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query("SELECT 1 FROM books WHERE id = \(bookID)", logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// The pin named, or the author's default pin (nil when the author has none).
    package func insert(authorID: UUID, post: NewPost, bookID: UUID?, on connection: PostgresConnection) async throws -> PostView {
        let rows = try await connection.query("""
            INSERT INTO posts (id, author_id, kind, body, book_id, copy_id, pin_id)
            VALUES (coalesce(\(post.id), gen_random_uuid()), \(authorID), \(post.kind.rawValue), \(post.body), \(bookID), \(post.copyID),
                    coalesce(\(post.pinID), (SELECT id FROM pins WHERE owner_id = \(authorID) AND is_default)))
            ON CONFLICT (id) DO NOTHING
            RETURNING id
            """, logger: logger)
        for try await id in rows.decode(UUID.self) {
            if let view = try await get(id, connection: connection) { return view }
        }
        if post.id != nil { throw ClientMadeID.conflict }
        throw AppError.unavailable("post insert returned no row")
    }

    /// Nil when no post has `id`; else whether it is `authorID`'s with the content of `post`
    /// (the book and pin only where the request names them: else the server chose them).
    func isSame(_ id: UUID, authorID: UUID, post: NewPost, on connection: PostgresConnection) async throws -> Bool? {
        let rows = try await connection.query("""
            SELECT author_id = \(authorID) AND kind = \(post.kind.rawValue) AND body = \(post.body)
                   AND copy_id IS NOT DISTINCT FROM \(post.copyID)
                   AND (\(post.bookID)::uuid IS NULL OR book_id = \(post.bookID))
                   AND (\(post.pinID)::uuid IS NULL OR pin_id = \(post.pinID))
            FROM posts WHERE id = \(id)
            """, logger: logger)
        for try await same in rows.decode(Bool.self) { return same }
        return nil
    }

    /// Locks the post and checks its author: 404 when missing, 403 when someone else's.
    package func lockOwned(_ id: UUID, by userID: UUID, on connection: PostgresConnection) async throws {
        let rows = try await connection.query("SELECT author_id FROM posts WHERE id = \(id) FOR UPDATE", logger: logger)
        for try await author in rows.decode(UUID.self) {
            guard author == userID else { throw AppError.forbidden("This post belongs to someone else") }
            return
        }
        throw AppError.notFound("No post with id \(id.apiString)")
    }

    package func delete(_ id: UUID, on connection: PostgresConnection) async throws {
        try await connection.query("DELETE FROM posts WHERE id = \(id)", logger: logger)
    }
}

/// `PostsStore.detail`'s statement: a lookup by primary key, prepared.
struct PostDetailSQL: PreparedSQL {
    static let name = "bookworm_post_detail"
    static let sql = "SELECT \(PostsStore.columns), \(Visibility.shown("po", owner: "author_id")) \(PostsStore.joins) WHERE po.id = $1"
    static var bindingDataTypes: [PostgresDataType] { [.uuid] }
    let values: [SQLValue]
}
