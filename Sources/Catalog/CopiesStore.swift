import Accounts
import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// What the library may be narrowed by.
package struct CopyFilter: Sendable {
    package var words: [String]?
    package var isbn13: String?
    var condition: String?
    var ownerID: UUID?
    /// Nil: available copies only (the library). Set: the owner's own list, every status.
    var includeAllStatuses = false
    /// The signed-in reader: copies of anyone they blocked, or who blocked them, are left out.
    package var viewerID: UUID?

    package init() {}
}

/// SQL for copies. Ownership is checked here, under a row lock, so a check and the change it
/// guards cannot be separated by a concurrent request.
package struct CopiesStore: Sendable {
    package let client: Database
    package let logger: Logger
    /// Set for the library's reads: searches then run prepared (`LibrarySearchSQL`).
    let frequencies: SearchFrequencies?

    package init(client: Database, logger: Logger, frequencies: SearchFrequencies? = nil) {
        self.client = client
        self.logger = logger
        self.frequencies = frequencies
    }

    package static let columns = """
        c.id, c.condition, c.status, c.notes, c.pin_id, c.photo_id, c.created_at, c.updated_at,
        (EXTRACT(EPOCH FROM c.created_at) * 1000000)::int8,
        b.id, b.isbn13, b.title, b.authors, u.id, u.username, u.display_name,
        CASE WHEN c.photo_id IS NOT NULL THEN
            (SELECT p.width || ' ' || p.height || ' ' || p.blurhash FROM photos p WHERE p.id = c.photo_id) END
        """
    package static let joins = "FROM copies c JOIN books b ON b.id = c.book_id JOIN users u ON u.id = c.owner_id"

    /// Copies older than the cursor whose position and id are the parameters `micros` and `id`,
    /// in (created_at, id) order: every library statement's keyset.
    static func olderThanCursor(micros: String, id: String) -> String {
        "(c.created_at, c.id) < (timestamptz 'epoch' + \(micros) * interval '1 microsecond', \(id))"
    }

    package typealias Row = (UUID, String, String, String?, UUID?, String?, Date, Date, Int64,
                     UUID, String?, String, [String], UUID, String, String?, String?)

    package static func view(_ row: Row) -> CopyView {
        CopyView(id: row.0, book: BookSummary(id: row.9, isbn13: row.10, title: row.11, authors: row.12),
                 owner: OwnerSummary(id: row.13, username: row.14, displayName: row.15),
                 condition: row.1, status: row.2, notes: row.3, pinID: row.4, photoID: row.5,
                 photo: PhotoInfo(id: row.5, column: row.16),
                 createdAt: row.6, updatedAt: row.7, createdMicros: row.8)
    }

    /// The row read from `cells`, column by column in order, where a statement's own columns
    /// before it have been read already.
    package static func row(_ cells: inout RowCells) throws -> Row {
        (try cells.next(UUID.self), try cells.next(String.self), try cells.next(String.self),
         try cells.next(String?.self), try cells.next(UUID?.self), try cells.next(String?.self),
         try cells.next(Date.self), try cells.next(Date.self), try cells.next(Int64.self),
         try cells.next(UUID.self), try cells.next(String?.self), try cells.next(String.self),
         try cells.next([String].self), try cells.next(UUID.self), try cells.next(String.self),
         try cells.next(String?.self), try cells.next(String?.self))
    }

    /// A client-made `id` another copy has already was answered by `clientMade` first; one
    /// committed since is `ClientMadeID.Raced` (the transaction runs again and `clientMade` answers).
    /// Pins, posts and wishes need no such thing: their creates are serialised per owner.
    package func create(id: UUID?, ownerID: UUID, bookID: UUID, condition: CopyCondition, notes: String?, pinID: UUID?,
                        on connection: PostgresConnection) async throws -> CopyView {
        do {
            let rows = try await connection.query("""
                INSERT INTO copies (id, owner_id, book_id, condition, notes, pin_id)
                VALUES (coalesce(\(id), gen_random_uuid()), \(ownerID), \(bookID), \(condition.rawValue), \(notes), \(pinID))
                ON CONFLICT (id) DO NOTHING
                RETURNING id
                """, logger: logger)
            for try await made in rows.decode(UUID.self) {
                if let copy = try await get(made, connection: connection) { return copy }
            }
        } catch let error as PSQLError where error.sqlState == "23503" {
            throw AppError.unprocessable("book_id: no book with id \(bookID.apiString)")
        }
        if id != nil { throw ClientMadeID.Raced() }
        throw AppError.unavailable("copy insert returned no row")
    }

    /// Nil when no copy has `id`; the copy when it is `ownerID`'s with this book, condition and
    /// notes (and pin, when the request names one); else `ClientMadeID.conflict`. Checked before
    /// a described book is looked up, since a book without an ISBN is made anew each time.
    package func clientMade(_ id: UUID, ownerID: UUID, book: BookChoice, condition: CopyCondition, notes: String?, pinID: UUID?,
                            on connection: PostgresConnection) async throws -> CopyView? {
        var bookID: UUID?, isbn13: String?, described: NewBook?
        switch book {
        case .existing(let id): bookID = id
        case .isbn(let isbn): isbn13 = isbn.isbn13
        case .described(let book) where book.isbn != nil: isbn13 = book.isbn?.isbn13
        case .described(let book): described = book
        }
        let query: PostgresQuery = """
            SELECT c.owner_id = \(ownerID) AND c.condition = \(condition.rawValue) AND c.notes IS NOT DISTINCT FROM \(notes)
                   AND (\(pinID)::uuid IS NULL OR c.pin_id = \(pinID))
                   AND CASE WHEN \(bookID)::uuid IS NOT NULL THEN b.id = \(bookID)
                            WHEN \(isbn13)::text IS NOT NULL THEN b.isbn13 = \(isbn13)
                            ELSE b.isbn13 IS NULL AND b.title = \(described?.title) AND b.authors = \(described?.authors)
                                 AND b.publisher IS NOT DISTINCT FROM \(described?.publisher)
                                 AND b.published_year IS NOT DISTINCT FROM \(described?.publishedYear)
                                 AND b.language IS NOT DISTINCT FROM \(described?.language) END
            FROM copies c JOIN books b ON b.id = c.book_id WHERE c.id = \(id)
            """
        for try await same in try await connection.query(query, logger: logger).decode(Bool.self) {
            guard same, let copy = try await get(id, connection: connection) else { throw ClientMadeID.conflict }
            return copy
        }
        return nil
    }

    /// Every write of a copy answers with it, read back in the write's transaction (`CopyByIDSQL`).
    package func get(_ id: UUID, connection: PostgresConnection? = nil) async throws -> CopyView? {
        try Self.views(try await client.execute(CopyByIDSQL(values: [.uuid(id)]), on: connection, logger: logger)).first
    }

    /// The copies among `ids` that `owner` owns (delta sync renders a page of changes at once).
    package func owned(_ ids: [UUID], owner: UUID) async throws -> [UUID: CopyView] {
        guard !ids.isEmpty else { return [:] }
        let query: PostgresQuery = "SELECT \(unescaped: Self.columns) \(unescaped: Self.joins) WHERE c.id = ANY(\(ids)) AND c.owner_id = \(owner)"
        var views: [UUID: CopyView] = [:]
        for view in try Self.views(try await client.query(query, logger: logger).rows) { views[view.id] = view }
        return views
    }

    /// The copy and whether others may see it (not hidden by reports, owner not suspended), in
    /// one prepared statement: the copy's page read them in two statements, each planned anew.
    func detail(_ id: UUID) async throws -> (copy: CopyView, shown: Bool)? {
        guard let row = try await client.execute(CopyDetailSQL(values: [.uuid(id)]), logger: logger).first else { return nil }
        var cells = RowCells(row)
        let detail = (Self.view(try Self.row(&cells)), try cells.next(Bool.self))
        try cells.end()
        return detail
    }

    /// Newest first by keyset; one query per page whatever its length.
    package func list(_ filter: CopyFilter, limit: Int, after: Cursor?, on connection: PostgresConnection? = nil) async throws -> [CopyView] {
        if Self.isPlainLibrary(filter) {
            return try Self.views(try await plainLibraryRows(filter, limit: limit, after: after, on: connection))
        }
        if Self.isPlainSearch(filter), let views = try await searchViews(filter, limit: limit, after: after, on: connection) {
            return views
        }
        if let anchor = Self.anchor(of: filter) {
            return try Self.views(try await anchoredRows(anchor, filter, limit: limit, after: after, on: connection))
        }
        let statement = Self.listStatement(filter, limit: limit, after: after)
        return try Self.views(try await client.query(statement.query, on: connection, logger: logger).rows)
    }

    /// Every row of a page of `columns`, decoded column by column: decoding the 17-column tuple
    /// through PostgresNIO's parameter packs looked up generic metadata for every cell, 14 % of
    /// the server's CPU for a library page of 20 (perf, 2026-11-26).
    package static func views(_ rows: [PostgresRow]) throws -> [CopyView] {
        try rows.map { row in
            var cells = RowCells(row)
            let copy = try Self.row(&cells)
            try cells.end()
            return view(copy)
        }
    }

    /// Built as text plus values so the benchmark can hand the identical SQL to pgbench. Only the
    /// filters a request has are in the text, each at the top level of the `WHERE`: written as
    /// `($n IS NULL OR …)`, the suspension and block checks stayed subplans the planner guesses
    /// keep half the rows each, so at 5,000,000 copies it took a common word for a rare one and
    /// sorted all its matches (358 ms) instead of reading newest first until the page is full.
    /// Top-level `NOT EXISTS` become anti-joins, estimated from the tables themselves.
    package static func listStatement(_ filter: CopyFilter, limit: Int, after: Cursor?) -> SQLStatement {
        var values: [SQLValue] = []
        func bind(_ value: SQLValue) -> String {
            values.append(value)
            return "$\(values.count)"
        }
        var conditions: [String] = []
        if !filter.includeAllStatuses { conditions.append("c.status = 'available' AND \(Visibility.shown("c", owner: "owner_id"))") }
        if let owner = filter.ownerID { conditions.append("c.owner_id = \(bind(.uuid(owner)))") }
        if let isbn = filter.isbn13 { conditions.append("b.isbn13 = \(bind(.text(isbn)))") }
        if let condition = filter.condition { conditions.append("c.condition = \(bind(.text(condition)))") }
        if let words = filter.words { conditions.append("c.search @@ bookworm_search_query(\(bind(.textArray(words))))") }
        if let after {
            conditions.append(olderThanCursor(micros: bind(.int(Int(after.micros))), id: bind(.uuid(after.id))))
        }
        if let viewer = filter.viewerID { conditions.append(BlocksStore.noBlockBetween(bind(.uuid(viewer)), "c.owner_id")) }
        return SQLStatement(sql: """
            SELECT \(columns) \(joins)
            WHERE \(conditions.isEmpty ? "true" : conditions.joined(separator: "\n  AND "))
            ORDER BY c.created_at DESC, c.id DESC
            LIMIT \(bind(.int(limit)))
            """, values: values)
    }

    /// Locks the copy and checks its owner: 404 when missing, 403 when someone else's.
    package func lockOwned(_ id: UUID, by userID: UUID, on connection: PostgresConnection) async throws -> String? {
        let rows = try await connection.query("SELECT owner_id, photo_id FROM copies WHERE id = \(id) FOR UPDATE",
                                              logger: logger)
        for try await (owner, photo) in rows.decode((UUID, String?).self) {
            guard owner == userID else { throw AppError.forbidden("This copy belongs to someone else") }
            return photo
        }
        throw AppError.notFound("No copy with id \(id.apiString)")
    }

    package func update(_ id: UUID, condition: CopyCondition?, status: CopyStatus?, notes: FieldUpdate<String>,
                pinID: FieldUpdate<UUID>, on connection: PostgresConnection) async throws {
        let (setNotes, notesValue) = notes.parts
        let (setPin, pinValue) = pinID.parts
        try await connection.query("""
            UPDATE copies SET
                condition = coalesce(\(condition?.rawValue), condition),
                status = coalesce(\(status?.rawValue), status),
                notes = CASE WHEN \(setNotes) THEN \(notesValue) ELSE notes END,
                pin_id = CASE WHEN \(setPin) THEN \(pinValue) ELSE pin_id END,
                updated_at = clock_timestamp()
            WHERE id = \(id)
            """, logger: logger)
    }

    /// The copy's status and how many open trades ask for or offer it; read under the copy's
    /// row lock, which every trade write takes first, so the answer holds until commit.
    func tradeHold(_ id: UUID, on connection: PostgresConnection) async throws -> (status: String, openTrades: Int) {
        let rows = try await connection.query("""
            SELECT c.status, (SELECT count(*) FROM trades t
                              WHERE (t.copy_id = c.id OR t.offered_copy_id = c.id) AND t.state IN ('requested', 'accepted'))::int8
            FROM copies c WHERE c.id = \(id)
            """, logger: logger)
        for try await (status, open) in rows.decode((String, Int).self) { return (status, open) }
        return ("withdrawn", 0)
    }

    package func delete(_ id: UUID, on connection: PostgresConnection) async throws {
        try await connection.query("DELETE FROM copies WHERE id = \(id)", logger: logger)
    }

    func setPhoto(_ id: UUID, photoID: String?, on connection: PostgresConnection) async throws {
        try await connection.query("UPDATE copies SET photo_id = \(photoID), updated_at = clock_timestamp() WHERE id = \(id)",
                                   logger: logger)
    }

    package func availableCount(ownerID: UUID) async throws -> Int {
        let rows = try await client.query(
            "SELECT count(*)::int8 FROM copies WHERE owner_id = \(ownerID) AND status = 'available'", logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }
}

/// `CopiesStore.get`'s statement, prepared for the reason `CopyDetailSQL` is: planning it took
/// 0.3–0.5 ms of PostgreSQL's CPU, more than running it, on every copy a client wrote.
struct CopyByIDSQL: PreparedSQL {
    static let name = "bookworm_copy_by_id"
    static let sql = "SELECT \(CopiesStore.columns) \(CopiesStore.joins) WHERE c.id = $1"
    static var bindingDataTypes: [PostgresDataType] { [.uuid] }
    let values: [SQLValue]
}

/// `CopiesStore.detail`'s statement. A lookup by primary key, whose plan never depends on the id,
/// so PostgreSQL settles on one after a few runs; unnamed, a pgbench of the copy's columns and
/// joins ran 5,200 tx/s planned each time against 23,600 prepared (1,000,000 copies).
struct CopyDetailSQL: PreparedSQL {
    static let name = "bookworm_copy_detail"
    static let sql = "SELECT \(CopiesStore.columns), \(Visibility.shown("c", owner: "owner_id")) \(CopiesStore.joins) WHERE c.id = $1"
    static var bindingDataTypes: [PostgresDataType] { [.uuid] }
    let values: [SQLValue]
}
