import BookwormCore
import Accounts
import Catalog
import Foundation
import Logging
import PostgresNIO

/// `bookworm seed`: realistic demo data, inserted in batches through `unnest` of bound arrays
/// (one round trip per few thousand rows), with a progress bar on standard error.
package struct Seeder: Sendable {
    package struct Counts: Sendable {
        package var users: Int
        package var books: Int
        package var copies: Int
        package var posts: Int
        package init(users: Int, books: Int, copies: Int, posts: Int = 0) {
            self.users = users
            self.books = books
            self.copies = copies
            self.posts = posts
        }
    }

    /// Every demo user's password, so a person can sign in as any of them.
    static let demoPassword = "bookworm-demo-password"
    package let client: Database
    package let logger: Logger
    let batch = 5000

    package init(client: Database, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    package func run(_ counts: Counts) async throws {
        var random = SystemRandomNumberGenerator()
        let run = String(UInt32.random(in: 0...UInt32.max, using: &random), radix: 36)
        let hash = try PasswordHasher.hashNow(Self.demoPassword, settings: .init())
        let userIDs = try await insertUsers(counts.users, run: run, hash: hash)
        let bookIDs = try await insertBooks(counts.books)
        try await insertCopies(counts.copies, owners: userIDs, books: bookIDs)
        _ = try await addPins()
        try await insertPosts(counts.posts)
        try await client.query("ANALYZE users", logger: logger)
        try await client.query("ANALYZE books", logger: logger)
        try await client.query("ANALYZE copies", logger: logger)
    }

    private func insertUsers(_ count: Int, run: String, hash: String) async throws -> [UUID] {
        var ids: [UUID] = []
        let progress = ProgressBar(label: "users", total: count)
        for start in stride(from: 0, to: count, by: batch) {
            let range = start..<min(count, start + batch)
            let batchIDs = range.map { _ in UUID() }
            let names = range.map { "r\(run)_\($0)" }
            let displays = range.map { "\(SeedData.firstNames[$0 % SeedData.firstNames.count]) \(SeedData.lastNames[($0 / 7) % SeedData.lastNames.count])" }
            let emails = names.map { "\($0)@example.org" }
            try await client.query("""
                INSERT INTO users (id, email, email_normalized, username, display_name, password_hash, email_verified_at)
                SELECT id, email, email, username, display_name, \(hash), now()
                FROM unnest(\(batchIDs)::uuid[], \(emails)::text[], \(names)::text[], \(displays)::text[])
                     AS t(id, email, username, display_name)
                """, logger: logger)
            ids += batchIDs
            progress.advance(to: range.upperBound)
        }
        return ids
    }

    private func insertBooks(_ count: Int) async throws -> [UUID] {
        var ids: [UUID] = []
        var generator = SystemRandomNumberGenerator()
        let progress = ProgressBar(label: "books", total: count)
        for start in stride(from: 0, to: count, by: batch) {
            let range = start..<min(count, start + batch)
            let batchIDs = range.map { _ in UUID() }
            // Distinct, valid ISBN-13s: the index itself is the registrant/title part.
            let isbns = range.map { ISBN.withCheckDigit(String(format: "978%09d", ($0 * 7919 + 1_000_003) % 1_000_000_000)) }
            let titles = range.map { _ in Self.title(using: &generator) }
            let authors = range.map { index in
                "\(SeedData.firstNames[index % SeedData.firstNames.count]) \(SeedData.lastNames[(index / 3) % SeedData.lastNames.count])"
            }
            let years = range.map { 1900 + ($0 * 37) % 125 }
            let languages = range.map { SeedData.languages[$0 % SeedData.languages.count] }
            let publishers = range.map { SeedData.publishers[$0 % SeedData.publishers.count] }
            try await client.query("""
                INSERT INTO books (id, isbn13, title, authors, publisher, published_year, language)
                SELECT id, isbn, title, ARRAY[author], publisher, year, language
                FROM unnest(\(batchIDs)::uuid[], \(isbns)::text[], \(titles)::text[], \(authors)::text[],
                            \(publishers)::text[], \(years)::int8[], \(languages)::text[])
                     AS t(id, isbn, title, author, publisher, year, language)
                ON CONFLICT (isbn13) DO NOTHING
                """, logger: logger)
            ids += batchIDs
            progress.advance(to: range.upperBound)
        }
        // Books that already existed (an earlier seed) were skipped; keep only ids that exist.
        let rows = try await client.query("SELECT id FROM books WHERE id = ANY(\(ids))", logger: logger)
        var existing: [UUID] = []
        for try await id in rows.decode(UUID.self) { existing.append(id) }
        return existing
    }

    private func insertCopies(_ count: Int, owners: [UUID], books: [UUID]) async throws {
        guard !owners.isEmpty, !books.isEmpty else { return }
        var generator = SystemRandomNumberGenerator()
        let progress = ProgressBar(label: "copies", total: count)
        let yearMicros = Int64(365 * 86400) * 1_000_000
        let perCopy = yearMicros / Int64(max(count, 1))
        for start in stride(from: 0, to: count, by: batch) {
            let range = start..<min(count, start + batch)
            // Oldest first, like a real service where a copy's row is written when it is listed:
            // the table's physical order then follows created_at, as it would in production.
            let ownerIDs = range.map { _ in owners.randomElement(using: &generator) ?? owners[0] }
            let bookIDs = range.map { _ in books.randomElement(using: &generator) ?? books[0] }
            let conditions = range.map { _ in SeedData.conditions.randomElement(using: &generator) ?? "good" }
            let statuses = range.map { _ in Int.random(in: 0..<10, using: &generator) == 0 ? "reserved" : "available" }
            let ages = range.map { index in Int64(count - index) * perCopy - Int64.random(in: 0..<max(perCopy, 1), using: &generator) }
            // Demo copies start no alert fan-out (see `copies_inserted`, migration 0041): a million jobs for nothing.
            try await client.transaction(logger: logger) { connection in
                try await connection.query("SELECT set_config('bookworm.seeding', 'on', true)", logger: logger)
                try await connection.query("""
                    INSERT INTO copies (owner_id, book_id, condition, status, created_at, updated_at)
                    SELECT owner, book, condition, status, now() - age * interval '1 microsecond', now() - age * interval '1 microsecond'
                    FROM unnest(\(ownerIDs)::uuid[], \(bookIDs)::uuid[], \(conditions)::text[], \(statuses)::text[], \(ages)::int8[])
                         AS t(owner, book, condition, status, age)
                    """, logger: logger)
            }
            progress.advance(to: range.upperBound)
        }
    }

    package static func title(using generator: inout SystemRandomNumberGenerator) -> String {
        let shape = SeedData.titleShapes.randomElement(using: &generator) ?? "%@ %@"
        let first = SeedData.titleWords.randomElement(using: &generator) ?? "Book"
        let second = SeedData.titleWords.randomElement(using: &generator) ?? "Title"
        return shape.components(separatedBy: "%@").count == 2
            ? shape.replacingOccurrences(of: "%@", with: first)
            : String(format: shape, first, second)
    }
}

/// A one-line progress bar on standard error (so output can still be piped).
final class ProgressBar: @unchecked Sendable {
    let label: String
    let total: Int
    let start = Date()
    /// Tenths already printed, when standard error is not a terminal.
    private var printedTenths = -1
    private let lock = NSLock()
    static let terminal = isatty(STDERR_FILENO) != 0

    init(label: String, total: Int) {
        self.label = label
        self.total = total
    }

    func advance(to done: Int) {
        guard total > 0 else { return }
        draw(done)
    }

    private func draw(_ done: Int) {
        let fraction = Double(done) / Double(total)
        let filled = Int(fraction * 30)
        let rate = Double(done) / max(Date().timeIntervalSince(start), 0.001)
        let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: 30 - filled)
        let padded = label.padding(toLength: 7, withPad: " ", startingAt: 0)
        let line = "\(padded) [\(bar)] \(Int(fraction * 100))% \(done)/\(total) (\(Int(rate))/s)"
        if Self.terminal {
            FileHandle.standardError.write(Data(("\r" + line + (done >= total ? "\n" : "")).utf8))
        } else if lock.withLock({ () -> Bool in
            // A log file or CI gets whole lines, one per tenth, not a screenful of carriage returns.
            guard Int(fraction * 10) > printedTenths || done >= total else { return false }
            printedTenths = Int(fraction * 10)
            return true
        }) {
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
    }
}
