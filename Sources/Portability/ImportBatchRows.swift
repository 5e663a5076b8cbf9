import BookwormCore
import Foundation
import PostgresNIO

/// The copies, readings and wishes of a batch: one statement each.
extension ImportBatch {
    /// Optional values travel as text ("" for none) and come back with `nullif(…, '')`.
    static func text(_ id: UUID?) -> String { id?.apiString ?? "" }

    func copies(_ records: [ImportRecord], books: [Int: UUID], _ context: Context, into outcomes: inout [ImportOutcome],
                on connection: PostgresConnection) async throws {
        let rows = records.indices.filter { books[$0] != nil && records[$0].copies > 0 }
        guard !rows.isEmpty else { return }
        let conditions = rows.map { ["new", "like_new", "good", "fair", "poor"].contains(records[$0].condition) ? records[$0].condition : "good" }
        let inserted = try await connection.query("""
            INSERT INTO copies (owner_id, book_id, condition, notes, pin_id, import_key)
            SELECT \(context.user), t.book, t.condition, nullif(t.notes, ''), nullif(t.pin, '')::uuid, t.key || ':' || n
            FROM unnest(\(rows.compactMap { books[$0] })::uuid[], \(conditions)::text[], \(rows.map { records[$0].notes ?? "" })::text[],
                        \(rows.map { Self.text(records[$0].pinKey.flatMap { context.pins[$0] }) })::text[], \(rows.map { records[$0].key })::text[],
                        \(rows.map { records[$0].copies })::int8[]) AS t(book, condition, notes, pin, key, copies)
            CROSS JOIN LATERAL generate_series(1, t.copies) AS n
            ON CONFLICT (owner_id, import_key) WHERE import_key IS NOT NULL DO NOTHING
            RETURNING import_key
            """, logger: logger)
        var created: [String: Int] = [:]
        for try await key in inserted.decode(String.self) {
            created[String(key[..<(key.lastIndex(of: ":") ?? key.endIndex)]), default: 0] += 1
        }
        for index in rows {
            outcomes[index].copies = created.removeValue(forKey: records[index].key) ?? 0
        }
    }

    func readings(_ records: [ImportRecord], books: [Int: UUID], _ context: Context, into outcomes: inout [ImportOutcome],
                  on connection: PostgresConnection) async throws {
        let states = ["interested", "reading", "finished", "abandoned"]
        let rows = records.indices.filter { books[$0] != nil && records[$0].reading.map(states.contains) == true }
        guard !rows.isEmpty else { return }
        let finished = rows.map { records[$0].finishedOn.flatMap(ImportText.day) }
        let started = rows.enumerated().map { offset, index in
            records[index].startedOn.flatMap(ImportText.day).flatMap { start in finished[offset].map { start <= $0 } ?? true ? start : nil }
        }
        let inserted = try await connection.query("""
            INSERT INTO readings (user_id, book_id, state, private, started_on, finished_on, created_at, updated_at)
            SELECT \(context.user), t.book, t.state, t.private, nullif(t.started, '')::date, nullif(t.finished, '')::date,
                   \(context.now), \(context.now)
            FROM unnest(\(rows.compactMap { books[$0] })::uuid[], \(rows.map { records[$0].reading ?? "" })::text[],
                        \(rows.map { records[$0].private_ })::bool[], \(started.map { $0 ?? "" })::text[], \(finished.map { $0 ?? "" })::text[])
                 AS t(book, state, private, started, finished)
            ON CONFLICT (user_id, book_id) DO NOTHING
            RETURNING book_id
            """, logger: logger)
        var created = Set<UUID>()
        for try await book in inserted.decode(UUID.self) { created.insert(book) }
        for index in rows where books[index].map({ created.remove($0) != nil }) == true { outcomes[index].readings = 1 }
    }

    /// Under the user's row lock, as `WishesService` takes it: the limit of 200 holds.
    func wishes(_ records: [ImportRecord], books: [Int: UUID], _ context: Context, into outcomes: inout [ImportOutcome],
                on connection: PostgresConnection) async throws {
        var rows = records.indices.filter { books[$0] != nil && records[$0].wish }
        guard !rows.isEmpty else { return }
        guard context.defaultPin != nil || rows.contains(where: { records[$0].pinKey.flatMap { context.pins[$0] } != nil }) else {
            for index in rows {
                outcomes[index].errors.append(ImportLineError(line: records[index].line, message: "the wish needs a pin: add one, then import again"))
            }
            return
        }
        try await connection.query("SELECT 1 FROM users WHERE id = \(context.user) FOR UPDATE", logger: logger)
        var existing = Set<UUID>()
        var count = 0
        let held = try await connection.query("SELECT book_id FROM wishes WHERE user_id = \(context.user)", logger: logger)
        for try await book in held.decode(UUID.self) { existing.insert(book); count += 1 }
        var room = Self.maxWishes - count
        rows = rows.filter { index in
            guard let book = books[index], !existing.contains(book) else { return false }
            guard room > 0 else {
                outcomes[index].errors.append(ImportLineError(line: records[index].line,
                                                              message: "the wish is over the limit of \(Self.maxWishes)"))
                return false
            }
            existing.insert(book)
            room -= 1
            return true
        }
        guard !rows.isEmpty else { return }
        let inserted = try await connection.query("""
            INSERT INTO wishes (user_id, book_id, work_key, any_edition, radius_km, pin_id, min_condition, created_at)
            SELECT \(context.user), b.id, b.work_key, t.any_edition, t.radius, nullif(t.pin, '')::uuid, nullif(t.minimum, ''), \(context.now)
            FROM unnest(\(rows.compactMap { books[$0] })::uuid[], \(rows.map { records[$0].wishAnyEdition })::bool[],
                        \(rows.map { min(max(records[$0].wishRadiusKm, 1), 500) })::float8[],
                        \(rows.map { Self.text(records[$0].pinKey.flatMap { context.pins[$0] }) })::text[],
                        \(rows.map { records[$0].wishMinCondition.flatMap { ["new", "like_new", "good", "fair", "poor"].contains($0) ? $0 : nil } ?? "" })::text[])
                 AS t(book, any_edition, radius, pin, minimum)
            JOIN books b ON b.id = t.book
            ON CONFLICT (user_id, book_id) DO NOTHING
            RETURNING book_id
            """, logger: logger)
        var created = Set<UUID>()
        for try await book in inserted.decode(UUID.self) { created.insert(book) }
        for index in rows where books[index].map({ created.remove($0) != nil }) == true { outcomes[index].wishes = 1 }
    }
}
