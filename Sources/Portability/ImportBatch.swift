import BookwormCore
import Catalog
import Foundation
import Logging
import PostgresNIO

/// Import records in a handful of set-based statements (books by ISBN, books by work, copies,
/// readings, wishes), whatever their number: a chunk at once, or one record at a time when the
/// database refuses the chunk, so one bad record costs only itself. Books are found by ISBN,
/// else by work key, else created; copies are keyed by their source, and readings and wishes
/// are one per book, so nothing is made twice.
struct ImportBatch: Sendable {
    let logger: Logger
    static let maxWishes = 200

    struct Context: Sendable {
        let user: UUID
        let defaultPin: UUID?
        let pins: [String: UUID]
        let now: Date
    }

    func defaultPin(of user: UUID, on connection: PostgresConnection) async throws -> UUID? {
        for try await id in try await connection.query("SELECT id FROM pins WHERE owner_id = \(user) AND is_default", logger: logger)
            .decode(UUID.self) { return id }
        return nil
    }

    func apply(_ records: [ImportRecord], _ context: Context, on connection: PostgresConnection) async throws -> [ImportOutcome] {
        var outcomes = records.map { _ in ImportOutcome() }
        var books: [Int: UUID] = [:]
        var isbns: [Int: String] = [:]
        for (index, record) in records.enumerated() {
            guard let raw = record.isbn, !raw.isEmpty else { continue }
            do { isbns[index] = try ISBN(raw).isbn13 } catch {
                outcomes[index].errors.append(ImportLineError(line: record.line, message: "ISBN \(raw.prefix(20)) \(error.message)"))
            }
        }
        let usable = records.indices.filter { outcomes[$0].errors.isEmpty }
        let byISBN = usable.filter { isbns[$0] != nil }, byWork = usable.filter { isbns[$0] == nil }
        var createdBooks = Set<UUID>()
        try await booksByISBN(byISBN.map { (isbns[$0] ?? "", records[$0]) }, into: &createdBooks, on: connection)
            .enumerated().forEach { books[byISBN[$0.offset]] = $0.element }
        try await booksByWork(byWork.map { records[$0] }, into: &createdBooks, on: connection)
            .enumerated().forEach { books[byWork[$0.offset]] = $0.element }
        // Each new book counts once, on the first record that names it.
        var counted = Set<UUID>()
        for index in usable {
            if let book = books[index], createdBooks.contains(book), counted.insert(book).inserted { outcomes[index].books = 1 }
        }
        try await copies(records, books: books, context, into: &outcomes, on: connection)
        try await readings(records, books: books, context, into: &outcomes, on: connection)
        try await wishes(records, books: books, context, into: &outcomes, on: connection)
        return outcomes
    }

    private static func authorsJSON(_ authors: [String]) -> String {
        String(decoding: (try? JSONEncoder().encode(authors)) ?? Data("[]".utf8), as: UTF8.self)
    }

    /// The book of each ISBN, inserted when missing (in input order).
    private func booksByISBN(_ input: [(isbn: String, record: ImportRecord)], into created: inout Set<UUID>,
                             on connection: PostgresConnection) async throws -> [UUID] {
        guard !input.isEmpty else { return [] }
        let rows = try await connection.query("""
            WITH input AS (
                SELECT ord, isbn, title, ARRAY(SELECT jsonb_array_elements_text(a::jsonb)) AS authors
                FROM unnest(\(input.indices.map { $0 })::int8[], \(input.map(\.isbn))::text[], \(input.map(\.record.title))::text[],
                            \(input.map { Self.authorsJSON($0.record.authors) })::text[]) AS t(ord, isbn, title, a)),
            inserted AS (
                INSERT INTO books (isbn13, title, authors)
                SELECT DISTINCT ON (isbn) isbn, title, authors FROM input ORDER BY isbn, ord
                ON CONFLICT (isbn13) DO NOTHING RETURNING id, isbn13)
            SELECT i.ord, coalesce(n.id, b.id), n.id IS NOT NULL
            FROM input i LEFT JOIN inserted n ON n.isbn13 = i.isbn LEFT JOIN books b ON b.isbn13 = i.isbn
            ORDER BY i.ord
            """, logger: logger)
        var ids: [UUID?] = []
        for try await (_, id, new) in rows.decode((Int64, UUID?, Bool).self) {
            ids.append(id)
            if new, let id { created.insert(id) }
        }
        // A book another transaction inserted after this statement's snapshot: read it now.
        let late = input.indices.filter { ids[$0] == nil }.map { input[$0].isbn }
        if !late.isEmpty {
            var found: [String: UUID] = [:]
            for try await (isbn, id) in try await connection.query("SELECT isbn13, id FROM books WHERE isbn13 = ANY(\(late))",
                                                                   logger: logger).decode((String, UUID).self) { found[isbn] = id }
            for index in input.indices where ids[index] == nil { ids[index] = found[input[index].isbn] }
        }
        return try ids.map { id in
            guard let id else { throw AppError.unavailable("a book vanished during an import") }
            return id
        }
    }

    /// A work's oldest book (`k.key` names the work): the first entry under the key in
    /// `books_work_oldest_idx` (migration 0042).
    static let oldestBookOfWork = "SELECT b.id FROM books b WHERE b.work_key = k.key ORDER BY b.created_at, b.id LIMIT 1"

    /// The oldest book of each record's work, made when there is none, under locks on those works
    /// (taken in one order, so two imports never deadlock or make a work twice). Each work's book
    /// is looked up on its own (`LATERAL`, `oldestBookOfWork`): with the chunk's 500 keys in
    /// view, PostgreSQL estimated 63 books a work on the bench catalogue and read all 763,000
    /// books instead (139-314 ms a chunk against 8).
    private func booksByWork(_ records: [ImportRecord], into created: inout Set<UUID>, on connection: PostgresConnection) async throws -> [UUID] {
        guard !records.isEmpty else { return [] }
        let titles = records.map(\.title), authors = records.map { Self.authorsJSON($0.authors) }
        let input = """
            SELECT ord, title, authors, bookworm_work_key(title, authors) AS key FROM (
                SELECT ord, title, ARRAY(SELECT jsonb_array_elements_text(a::jsonb)) AS authors
                FROM unnest($1::int8[], $2::text[], $3::text[]) AS t(ord, title, a)) x
            """
        var binds = PostgresBindings()
        binds.append(records.indices.map { Int64($0) })
        binds.append(titles)
        binds.append(authors)
        try await connection.query(PostgresQuery(unsafeSQL: """
            SELECT pg_advisory_xact_lock(hashtext('work:' || key)) FROM (SELECT DISTINCT key FROM (\(input)) k ORDER BY key) l
            """, binds: binds), logger: logger)
        let rows = try await connection.query(PostgresQuery(unsafeSQL: """
            WITH keyed AS (\(input)),
            found AS (
                SELECT k.key AS work_key, b.id FROM (SELECT DISTINCT key FROM keyed) k
                CROSS JOIN LATERAL (\(Self.oldestBookOfWork)) b),
            inserted AS (
                INSERT INTO books (title, authors)
                SELECT DISTINCT ON (key) title, authors FROM keyed WHERE key NOT IN (SELECT work_key FROM found) ORDER BY key, ord
                RETURNING id, work_key)
            SELECT k.ord, coalesce(f.id, n.id), n.id IS NOT NULL
            FROM keyed k LEFT JOIN found f ON f.work_key = k.key LEFT JOIN inserted n ON n.work_key = k.key
            ORDER BY k.ord
            """, binds: binds), logger: logger)
        var ids: [UUID] = []
        for try await (_, id, new) in rows.decode((Int64, UUID, Bool).self) {
            ids.append(id)
            if new { created.insert(id) }
        }
        return ids
    }
}
