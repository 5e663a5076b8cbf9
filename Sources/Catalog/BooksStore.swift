import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// SQL for editions.
package struct BooksStore: Sendable {
    package let client: Database
    package let logger: Logger

    package init(client: Database, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    package static let columns = """
        b.id, b.isbn13, b.title, b.authors, b.publisher, b.published_year, b.language,
        (SELECT count(*) FROM copies ac WHERE ac.book_id = b.id AND ac.status = 'available')::int8,
        (EXTRACT(EPOCH FROM b.created_at) * 1000000)::int8
        """

    package typealias Row = (UUID, String?, String, [String], String?, Int?, String?, Int, Int64)

    package static func view(_ row: Row) -> BookView {
        BookView(id: row.0, isbn13: row.1, title: row.2, authors: row.3, publisher: row.4,
                 publishedYear: row.5, language: row.6, availableCopies: row.7)
    }

    /// One row per ISBN even when two clients create it at the same moment: the insert yields
    /// to the unique index and the loser reads the winner's row. Books without an ISBN are
    /// always new.
    package func findOrCreate(_ book: NewBook, on connection: PostgresConnection) async throws -> (BookView, created: Bool) {
        let isbn13 = book.isbn?.isbn13
        let statement = NewBookSQL(values: [.text(isbn13), .text(book.title), .textArray(book.authors), .text(book.publisher),
                                            .int(book.publishedYear), .text(book.language)])
        for row in try await client.execute(statement, on: connection, logger: logger) { return (Self.view(try row.decode(Row.self)), true) }
        let existing = try await connection.query("SELECT \(unescaped: Self.columns) FROM books b WHERE b.isbn13 = \(isbn13)",
                                                  logger: logger)
        for try await row in existing.decode(Row.self) { return (Self.view(row), false) }
        throw AppError.unavailable("book \(isbn13 ?? "-") vanished during find-or-create")
    }

    func findOrCreate(_ book: NewBook) async throws -> (BookView, created: Bool) {
        try await client.withConnection { try await findOrCreate(book, on: $0) }
    }

    package func get(_ id: UUID) async throws -> BookView? {
        let rows = try await client.query("SELECT \(unescaped: Self.columns) FROM books b WHERE b.id = \(id)", logger: logger)
        for try await row in rows.decode(Row.self) { return Self.view(row) }
        return nil
    }

    package func exists(_ id: UUID, on connection: PostgresConnection) async throws -> Bool {
        for try await _ in try await connection.query("SELECT 1 FROM books WHERE id = \(id)", logger: logger) { return true }
        return false
    }

    package func id(isbn13: String, on connection: PostgresConnection) async throws -> UUID? {
        let rows = try await connection.query("SELECT id FROM books WHERE isbn13 = \(isbn13)", logger: logger)
        for try await id in rows.decode(UUID.self) { return id }
        return nil
    }

    /// The other editions of `id`'s work (same work key), oldest publication first.
    package func editions(of id: UUID, limit: Int = 50) async throws -> [BookSummary] {
        let rows = try await client.query("""
            SELECT e.id, e.isbn13, e.title, e.authors FROM books b JOIN books e ON e.work_key = b.work_key AND e.id <> b.id
            WHERE b.id = \(id)
            ORDER BY e.published_year NULLS LAST, e.created_at, e.id LIMIT \(limit)
            """, logger: logger)
        var editions: [BookSummary] = []
        for try await (bookID, isbn13, title, authors) in rows.decode((UUID, String?, String, [String]).self) {
            editions.append(BookSummary(id: bookID, isbn13: isbn13, title: title, authors: authors))
        }
        return editions
    }

    /// Newest first; `isbn` is an exact ISBN-13, `words` an accent-insensitive search with the
    /// last word matched as a prefix.
    /// Each book with its keyset position; `limit` rows at most.
    package func list(isbn13: String?, words: [String]?, limit: Int, after: Cursor?) async throws -> [(Cursor, BookView)] {
        let rows = try await client.query("""
            SELECT \(unescaped: Self.columns) FROM books b
            WHERE (\(isbn13)::text IS NULL OR b.isbn13 = \(isbn13))
              AND (\(words)::text[] IS NULL OR b.search @@ bookworm_search_query(\(words)))
              AND (\(after?.micros)::int8 IS NULL
                   OR (b.created_at, b.id) < (timestamptz 'epoch' + \(after?.micros) * interval '1 microsecond', \(after?.id)))
            ORDER BY b.created_at DESC, b.id DESC
            LIMIT \(limit)
            """, logger: logger)
        var collected: [(Cursor, BookView)] = []
        for try await row in rows.decode(Row.self) { collected.append((Cursor(micros: row.8, id: row.0), Self.view(row))) }
        return collected
    }
}

/// `BooksStore.findOrCreate`'s insert, prepared: every copy of a book without an ISBN makes one,
/// and parsing and planning it took 0.3 ms of PostgreSQL's CPU each time, as long as the insert.
struct NewBookSQL: PreparedSQL {
    static let name = "bookworm_new_book"
    static let sql = """
        INSERT INTO books AS b (isbn13, title, authors, publisher, published_year, language)
        VALUES ($1, $2, $3, $4, $5, $6)
        ON CONFLICT (isbn13) DO NOTHING
        RETURNING \(BooksStore.columns)
        """
    static var bindingDataTypes: [PostgresDataType] { [.text, .text, .textArray, .text, .int8, .text] }
    let values: [SQLValue]
}
