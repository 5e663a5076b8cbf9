import BookwormCore
import Catalog
import Foundation
import Logging
import PostgresNIO

/// SQL for what one import record makes: its book (found by ISBN, else by work key, else
/// created), its copies (keyed by the source, so never twice), its reading and its wish (the
/// user's one per book, so never twice either). Each record runs under a savepoint: one that
/// fails is reported on its line and the rest of the chunk goes on.
struct ImportWriter: Sendable {
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

    func apply(_ record: ImportRecord, _ context: Context, on connection: PostgresConnection) async throws -> ImportOutcome {
        var outcome = ImportOutcome()
        var isbn13: String?
        if let raw = record.isbn, !raw.isEmpty {
            do { isbn13 = try ISBN(raw).isbn13 } catch {
                outcome.errors.append(ImportLineError(line: record.line, message: "ISBN \(raw.prefix(20)) \(error.message)"))
                return outcome
            }
        }
        try await connection.query("SAVEPOINT import_record", logger: logger)
        do {
            let (book, created) = try await self.book(isbn13: isbn13, title: record.title, authors: record.authors, on: connection)
            outcome.books = created ? 1 : 0
            try await write(record, book: book, context, into: &outcome, on: connection)
            try await connection.query("RELEASE SAVEPOINT import_record", logger: logger)
        } catch let error as PSQLError {
            try await connection.query("ROLLBACK TO SAVEPOINT import_record", logger: logger)
            let detail = error.serverInfo?[.message] ?? "database error"
            return ImportOutcome(errors: [ImportLineError(line: record.line, message: "could not be imported: \(detail)")])
        }
        return outcome
    }

    private func write(_ record: ImportRecord, book: UUID, _ context: Context, into outcome: inout ImportOutcome,
                       on connection: PostgresConnection) async throws {
        let pin = record.pinKey.flatMap { context.pins[$0] }
        if record.copies > 0 {
            let condition = ["new", "like_new", "good", "fair", "poor"].contains(record.condition) ? record.condition : "good"
            let rows = try await connection.query("""
                INSERT INTO copies (owner_id, book_id, condition, notes, pin_id, import_key)
                SELECT \(context.user), \(book), \(condition), \(record.notes), \(pin), \(record.key) || ':' || n
                FROM generate_series(1, \(record.copies)) AS n
                ON CONFLICT (owner_id, import_key) WHERE import_key IS NOT NULL DO NOTHING
                RETURNING 1
                """, logger: logger)
            outcome.copies = try await rows.collect().count
        }
        if let state = record.reading, ["interested", "reading", "finished", "abandoned"].contains(state) {
            let finished = record.finishedOn.flatMap(ImportText.day)
            let started = record.startedOn.flatMap(ImportText.day).flatMap { start in finished.map { start <= $0 } ?? true ? start : nil }
            let rows = try await connection.query("""
                INSERT INTO readings (user_id, book_id, state, private, started_on, finished_on, created_at, updated_at)
                VALUES (\(context.user), \(book), \(state), \(record.private_), \(started)::date, \(finished)::date, \(context.now), \(context.now))
                ON CONFLICT (user_id, book_id) DO NOTHING
                RETURNING 1
                """, logger: logger)
            outcome.readings = try await rows.collect().count
        }
        if record.wish {
            try await wish(record, book: book, pin: pin, context, into: &outcome, on: connection)
        }
    }

    private func wish(_ record: ImportRecord, book: UUID, pin: UUID?, _ context: Context, into outcome: inout ImportOutcome,
                      on connection: PostgresConnection) async throws {
        guard pin != nil || context.defaultPin != nil else {
            outcome.errors.append(ImportLineError(line: record.line, message: "the wish needs a pin: add one, then import again"))
            return
        }
        let count = try await connection.query("SELECT count(*)::int8 FROM wishes WHERE user_id = \(context.user)", logger: logger)
        for try await value in count.decode(Int64.self) where value >= Self.maxWishes {
            outcome.errors.append(ImportLineError(line: record.line, message: "the wish is over the limit of \(Self.maxWishes)"))
            return
        }
        let radius = min(max(record.wishRadiusKm, 1), 500)
        let minimum = record.wishMinCondition.flatMap { ["new", "like_new", "good", "fair", "poor"].contains($0) ? $0 : nil }
        let rows = try await connection.query("""
            INSERT INTO wishes (user_id, book_id, work_key, any_edition, radius_km, pin_id, min_condition, created_at)
            SELECT \(context.user), b.id, b.work_key, \(record.wishAnyEdition), \(radius), \(pin), \(minimum), \(context.now)
            FROM books b WHERE b.id = \(book)
            ON CONFLICT (user_id, book_id) DO NOTHING
            RETURNING 1
            """, logger: logger)
        outcome.wishes = try await rows.collect().count
    }

    /// By ISBN when there is one; else the oldest book of the same work, under a lock on the
    /// work so two imports never make it twice.
    private func book(isbn13: String?, title: String, authors: [String], on connection: PostgresConnection) async throws -> (UUID, Bool) {
        if let isbn13 {
            let inserted = try await connection.query("""
                INSERT INTO books (isbn13, title, authors) VALUES (\(isbn13), \(title), \(authors))
                ON CONFLICT (isbn13) DO NOTHING RETURNING id
                """, logger: logger)
            for try await id in inserted.decode(UUID.self) { return (id, true) }
            for try await id in try await connection.query("SELECT id FROM books WHERE isbn13 = \(isbn13)", logger: logger)
                .decode(UUID.self) { return (id, false) }
            throw AppError.unavailable("book \(isbn13) vanished")
        }
        try await connection.query("SELECT pg_advisory_xact_lock(hashtext('work:' || bookworm_work_key(\(title), \(authors))))",
                                   logger: logger)
        let found = try await connection.query("""
            SELECT id FROM books WHERE work_key = bookworm_work_key(\(title), \(authors)) ORDER BY created_at, id LIMIT 1
            """, logger: logger)
        for try await id in found.decode(UUID.self) { return (id, false) }
        for try await id in try await connection.query("INSERT INTO books (title, authors) VALUES (\(title), \(authors)) RETURNING id",
                                                        logger: logger).decode(UUID.self) { return (id, true) }
        throw AppError.unavailable("book insert returned no row")
    }
}
