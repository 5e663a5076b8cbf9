import BookwormCore
import Catalog
import Foundation
import Logging
import PostgresNIO

/// SQL for readings: one row per user and book.
struct ReadingsStore: Sendable {
    let client: Database
    let logger: Logger

    static let columns = """
        b.id, b.isbn13, b.title, b.authors, r.state, r.private, r.closing_remark, r.started_on::text, r.finished_on::text,
        r.created_at, r.updated_at, (EXTRACT(EPOCH FROM r.updated_at) * 1000000)::int8
        """

    /// Creates or replaces the reading; true when it is new.
    func put(user: UUID, book: UUID, _ input: ReadingInput, now: Date, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query("""
            INSERT INTO readings AS r (user_id, book_id, state, private, closing_remark, started_on, finished_on, created_at, updated_at)
            VALUES (\(user), \(book), \(input.state.rawValue), \(input.isPrivate), \(input.closingRemark),
                    \(input.startedOn)::date, \(input.finishedOn)::date, \(now), \(now))
            ON CONFLICT (user_id, book_id) DO UPDATE SET
                state = excluded.state, private = excluded.private, closing_remark = excluded.closing_remark,
                started_on = excluded.started_on, finished_on = excluded.finished_on, updated_at = excluded.updated_at
            RETURNING (r.xmax = 0)
            """, logger: logger)
        for try await created in rows.decode(Bool.self) { return created }
        throw AppError.unavailable("reading upsert returned no row")
    }

    func get(user: UUID, book: UUID, on connection: PostgresConnection? = nil) async throws -> ReadingView? {
        try await Self.views(client.query("""
            SELECT \(unescaped: Self.columns) FROM readings r JOIN books b ON b.id = r.book_id
            WHERE r.user_id = \(user) AND r.book_id = \(book)
            """, on: connection, logger: logger)).first
    }

    /// The readings of `user` among `books`, keyed by book (delta sync).
    func owned(books: [UUID], user: UUID) async throws -> [UUID: ReadingView] {
        guard !books.isEmpty else { return [:] }
        let views = try await Self.views(client.query("""
            SELECT \(unescaped: Self.columns) FROM readings r JOIN books b ON b.id = r.book_id
            WHERE r.user_id = \(user) AND r.book_id = ANY(\(books))
            """, logger: logger))
        return Dictionary(views.map { ($0.book.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    func delete(user: UUID, book: UUID, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await client.query("DELETE FROM readings WHERE user_id = \(user) AND book_id = \(book) RETURNING 1", on: connection,
                                          logger: logger)
        return rows.rows.count > 0
    }

    /// A shelf, newest change first; `publicOnly` hides private readings (someone else's shelf).
    func list(user: UUID, publicOnly: Bool, state: ReadingState?, after: Cursor?, limit: Int) async throws -> [ReadingView] {
        try await Self.views(client.query("""
            SELECT \(unescaped: Self.columns) FROM readings r JOIN books b ON b.id = r.book_id
            WHERE r.user_id = \(user) AND (NOT \(publicOnly) OR NOT r.private)
              AND (\(state?.rawValue)::text IS NULL OR r.state = \(state?.rawValue))
              AND (\(after.map { Int($0.micros) })::int8 IS NULL
                   OR (r.updated_at, r.book_id) < (timestamptz 'epoch' + \(after.map { Int($0.micros) }) * interval '1 microsecond', \(after?.id)))
            ORDER BY r.updated_at DESC, r.book_id DESC
            LIMIT \(limit)
            """, logger: logger))
    }

    private static func views(_ rows: Rows) async throws -> [ReadingView] {
        var views: [ReadingView] = []
        for try await row in rows.decode((UUID, String?, String, [String], String, Bool, String?, String?, String?, Date, Date, Int64).self) {
            views.append(ReadingView(book: BookSummary(id: row.0, isbn13: row.1, title: row.2, authors: row.3), state: row.4,
                                     isPrivate: row.5, closingRemark: row.6, startedOn: row.7, finishedOn: row.8,
                                     createdAt: row.9, updatedAt: row.10, sortMicros: row.11))
        }
        return views
    }
}
