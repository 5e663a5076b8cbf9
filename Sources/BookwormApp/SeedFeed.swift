import Foundation
import PostgresNIO

extension Seeder {
    static let postOpenings = [
        "Happy to swap", "Looking for", "Anyone have", "Giving away for a trade:", "Trading my copy of",
        "Still searching for", "Swap offer:", "Would love to read", "Clearing my shelf:", "Need for book club:",
    ]

    /// Posts by users who have a pin, each placed on its author's default pin (so the nearby
    /// feed has the same city clusters as nearby copies), spread over the past year, written
    /// oldest first as a live service would write them; about half name a book.
    func insertPosts(_ count: Int) async throws {
        guard count > 0 else { return }
        var authors: [(UUID, UUID)] = []
        let rows = try await client.query("SELECT owner_id, id FROM pins WHERE is_default", logger: logger)
        for try await row in rows.decode((UUID, UUID).self) { authors.append(row) }
        var books: [UUID] = []
        for try await id in try await client.query("SELECT id FROM books ORDER BY random() LIMIT 50000", logger: logger)
            .decode(UUID.self) { books.append(id) }
        guard !authors.isEmpty else { return }
        var generator = SystemRandomNumberGenerator()
        let progress = ProgressBar(label: "posts", total: count)
        let perPost = Int64(365 * 86400) * 1_000_000 / Int64(count)
        for start in stride(from: 0, to: count, by: batch) {
            let range = start..<min(count, start + batch)
            let picked = range.map { _ in authors.randomElement(using: &generator) ?? authors[0] }
            let kinds = range.map { _ in Bool.random(using: &generator) ? "offer" : "wanted" }
            let bodies = range.map { index in
                "\(Self.postOpenings[index % Self.postOpenings.count]) \(Self.title(using: &generator)) (#\(index))"
            }
            // "" for no book: arrays of optionals do not bind, NULLIF turns it back into NULL.
            let bookIDs = range.map { _ in Bool.random(using: &generator) ? books.randomElement(using: &generator)?.apiString ?? "" : "" }
            let ages = range.map { index in Int64(count - index) * perPost - Int64.random(in: 0..<max(perPost, 1), using: &generator) }
            try await client.query("""
                INSERT INTO posts (author_id, kind, body, book_id, pin_id, created_at)
                SELECT author, kind, body, NULLIF(book, '')::uuid, pin, now() - age * interval '1 microsecond'
                FROM unnest(\(picked.map(\.0))::uuid[], \(kinds)::text[], \(bodies)::text[], \(bookIDs)::text[],
                            \(picked.map(\.1))::uuid[], \(ages)::int8[]) AS t(author, kind, body, book, pin, age)
                """, logger: logger)
            progress.advance(to: range.upperBound)
        }
        try await client.query("ANALYZE posts", logger: logger)
    }
}
