import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// SQL for imports: the upload and its progress, and what one record makes.
struct ImportStore: Sendable {
    let client: Database
    let logger: Logger

    /// A new import, `uploading`, unless one of the user's is still active. An upload left
    /// `uploading` for an hour (its server stopped mid-upload) is dropped here.
    func create(user: UUID, format: ImportFormat, now: Date, on connection: PostgresConnection) async throws -> UUID? {
        try await connection.query("SELECT 1 FROM users WHERE id = \(user) FOR UPDATE", logger: logger)
        try await connection.query("""
            DELETE FROM imports WHERE user_id = \(user) AND status = 'uploading' AND created_at < \(now) - interval '1 hour'
            """, logger: logger)
        let active = try await connection.query("""
            SELECT 1 FROM imports WHERE user_id = \(user) AND status IN ('uploading', 'queued', 'running')
            """, logger: logger)
        for try await _ in active { return nil }
        let rows = try await connection.query("""
            INSERT INTO imports (user_id, format, status, total, created_at)
            VALUES (\(user), \(format.rawValue), 'uploading', 0, \(now))
            RETURNING id
            """, logger: logger)
        for try await id in rows.decode(UUID.self) { return id }
        throw AppError.unavailable("import insert returned no row")
    }

    /// The next part of an upload, as it arrived.
    func addPart(_ id: UUID, seq: Int, bytes: ByteBuffer) async throws {
        try await client.query("INSERT INTO import_parts (import_id, seq, bytes) VALUES (\(id), \(seq), \(bytes))", logger: logger)
    }

    /// The upload is complete: the import is queued for the worker.
    func queue(_ id: UUID, on connection: PostgresConnection) async throws {
        try await connection.query("UPDATE imports SET status = 'queued' WHERE id = \(id) AND status = 'uploading'", logger: logger)
        try await JobStore.enqueue(kind: ImportJob.jobKind, key: id.apiString, on: connection, logger: logger)
    }

    /// Uploads left `uploading` since before `before` (their server stopped mid-upload), with their parts.
    func dropAbandoned(before: Date) async throws {
        try await client.query("DELETE FROM imports WHERE status = 'uploading' AND created_at < \(before)", logger: logger)
    }

    /// An upload that did not complete (too large, the client went away), with its parts.
    func discard(_ id: UUID) async throws {
        try await client.query("DELETE FROM imports WHERE id = \(id) AND status = 'uploading'", logger: logger)
    }

    func view(_ id: UUID, user: UUID) async throws -> ImportView? {
        let rows = try await client.query("""
            SELECT id, format, status, total, done, created_books, created_copies, created_readings, created_wishes, skipped,
                   errors::text, created_at, finished_at
            FROM imports WHERE id = \(id) AND user_id = \(user)
            """, logger: logger)
        for try await row in rows.decode((UUID, String, String, Int, Int, Int, Int, Int, Int, Int, String, Date, Date?).self) {
            let errors = ((try? JSONDecoder().decode([ImportLineError].self, from: Data(row.10.utf8))) ?? []).sorted { $0.line < $1.line }
            return ImportView(id: row.0, format: row.1, status: row.2, total: row.3, done: row.4,
                              created: .init(books: row.5, copies: row.6, readings: row.7, wishes: row.8),
                              skipped: row.9, errors: errors, createdAt: row.11, finishedAt: row.12)
        }
        return nil
    }

    struct Pending: Sendable {
        let user: UUID
        let format: ImportFormat
        let payload: Data
        let total: Int
    }

    struct Progress: Sendable {
        let user: UUID
        let done: Int
    }

    /// The import to continue, with its file; nil when it is finished (or gone with its user).
    /// The file is gathered part by part into one buffer of its exact size: received as one
    /// 10 MiB row it cost the worker that row's growing receive buffer and a copy besides.
    func lockPending(_ id: UUID, on connection: PostgresConnection) async throws -> Pending? {
        let rows = try await connection.query("""
            SELECT user_id, format, payload,
                   (SELECT coalesce(sum(octet_length(p.bytes)), 0)::int8 FROM import_parts p WHERE p.import_id = imports.id), total
            FROM imports WHERE id = \(id) AND status IN ('queued', 'running') FOR UPDATE
            """, logger: logger)
        var found: (user: UUID, format: ImportFormat, payload: Data?, size: Int, total: Int)?
        for try await (user, format, payload, size, total) in rows.decode((UUID, String, Data?, Int, Int).self) {
            guard let format = ImportFormat(rawValue: format) else { return nil }
            found = (user, format, payload, size, total)
        }
        guard let found else { return nil }
        if let payload = found.payload { return Pending(user: found.user, format: found.format, payload: payload, total: found.total) }
        var file = Data(capacity: found.size)
        let parts = try await connection.query("SELECT bytes FROM import_parts WHERE import_id = \(id) ORDER BY seq", logger: logger)
        for try await part in parts.decode(ByteBuffer.self) { file.append(contentsOf: part.readableBytesView) }
        guard !file.isEmpty else { return nil }
        return Pending(user: found.user, format: found.format, payload: file, total: found.total)
    }

    /// The import's progress, locked for a chunk; its file is not read again.
    func lockProgress(_ id: UUID, on connection: PostgresConnection) async throws -> Progress? {
        let rows = try await connection.query("""
            SELECT user_id, done FROM imports WHERE id = \(id) AND status IN ('queued', 'running') FOR UPDATE
            """, logger: logger)
        for try await (user, done) in rows.decode((UUID, Int).self) { return Progress(user: user, done: done) }
        return nil
    }

    /// How many records and error lines the file holds, known once the job has read it.
    func setTotal(_ id: UUID, _ total: Int) async throws {
        try await client.query("UPDATE imports SET total = \(total) WHERE id = \(id)", logger: logger)
    }

    func progress(_ id: UUID, done: Int, outcome: ImportOutcome, skipped: Int, finished: Bool, now: Date,
                  on connection: PostgresConnection) async throws {
        let errors = String(decoding: try JSONEncoder().encode(outcome.errors), as: UTF8.self)
        try await connection.query("""
            UPDATE imports SET status = \(finished ? "done" : "running"), done = \(done),
                created_books = created_books + \(outcome.books), created_copies = created_copies + \(outcome.copies),
                created_readings = created_readings + \(outcome.readings), created_wishes = created_wishes + \(outcome.wishes),
                skipped = skipped + \(skipped), errors = errors || \(errors)::jsonb,
                payload = CASE WHEN \(finished) THEN NULL ELSE payload END,
                finished_at = CASE WHEN \(finished) THEN \(now) ELSE NULL END
            WHERE id = \(id)
            """, logger: logger)
        if finished { try await connection.query("DELETE FROM import_parts WHERE import_id = \(id)", logger: logger) }
    }

    func savepoint(_ name: String, on connection: PostgresConnection) async throws {
        try await connection.query(PostgresQuery(unsafeSQL: "SAVEPOINT \(name)"), logger: logger)
    }

    func release(_ name: String, on connection: PostgresConnection) async throws {
        try await connection.query(PostgresQuery(unsafeSQL: "RELEASE SAVEPOINT \(name)"), logger: logger)
    }

    func rollback(to name: String, on connection: PostgresConnection) async throws {
        try await connection.query(PostgresQuery(unsafeSQL: "ROLLBACK TO SAVEPOINT \(name)"), logger: logger)
    }

    func fail(_ id: UUID, message: String, now: Date) async throws {
        let errors = String(decoding: try JSONEncoder().encode([ImportLineError(line: 0, message: message)]), as: UTF8.self)
        try await client.query("""
            WITH parts AS (DELETE FROM import_parts WHERE import_id = \(id))
            UPDATE imports SET status = 'failed', payload = NULL, finished_at = \(now), errors = errors || \(errors)::jsonb
            WHERE id = \(id)
            """, logger: logger)
    }
}
