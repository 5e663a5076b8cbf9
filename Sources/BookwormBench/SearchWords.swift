import BookwormCore
import Catalog
import Foundation
import Logging
import PostgresNIO

/// Library search by kind of query word: each word's first page on the server's own path
/// (`CopiesStore.list`, which picks the prepared newest-first statement or the planned one from
/// the words' statistics) against the planned statement alone (the unnamed statement PostgreSQL
/// plans with the words on every run). A wrong pick reads the whole library newest first, so no
/// word may take more than 10 times the planned statement's time. Both must return the same page.
struct SearchWords {
    struct Timing {
        let kind: String
        let query: String
        let shape: String
        let server: Double
        let planned: Double
        var ratio: Double { server / max(planned, 0.000_001) }
    }

    static let goal = 10.0
    /// A word only three copies carry, all older than the rest of the library: newest first would
    /// read every copy before finding them.
    static let rareWord = "quetzalcoatl"

    static func addRareCopies(_ database: BenchDatabase) throws {
        try database.execute("""
            INSERT INTO books (title, authors)
            SELECT 'Quetzalcoatl Almanac', ARRAY['Bookworm Benchmark']
            WHERE NOT EXISTS (SELECT 1 FROM books WHERE title = 'Quetzalcoatl Almanac');
            INSERT INTO copies (owner_id, book_id, condition, created_at, updated_at)
            SELECT u.id, b.id, 'good', now() - interval '400 days', now() - interval '400 days'
            FROM (SELECT id FROM users ORDER BY created_at LIMIT 3) u
            CROSS JOIN (SELECT id FROM books WHERE title = 'Quetzalcoatl Almanac') b
            WHERE NOT EXISTS (SELECT 1 FROM copies c WHERE c.book_id = b.id);
            """)
    }

    static let words: [(kind: String, query: String)] = [
        ("common word", "river"), ("stop word", "the"), ("two words, the last a prefix", "shadow garc"),
        ("rare word", rareWord), ("misspelled", "shadwo"), ("absent", "zeppelin"), ("one-letter prefix", "s"),
    ]

    static func measure(database: Database, runs: Int = 25, limit: Int = 20) async throws -> [Timing] {
        let logger = Logger(label: "bench")
        let frequencies = SearchFrequencies(clock: SystemClock())
        let store = CopiesStore(client: database, logger: logger, frequencies: frequencies)
        var timings: [Timing] = []
        for (kind, query) in words {
            var filter = CopyFilter()
            filter.words = CatalogValidation.searchWords(query)
            let shape = await frequencies.shape(filter.words ?? [], limit: limit + 1, client: database, logger: logger)
            let planned = CopiesStore.listStatement(filter, limit: limit + 1, after: nil).query
            let ours = try await store.list(filter, limit: limit + 1, after: nil).map(\.id)
            let theirs = try CopiesStore.views(try await database.query(planned, logger: logger).rows).map(\.id)
            guard ours == theirs else { throw Shell.Failure(description: "search \"\(query)\": the server's page differs from the planned statement's") }
            let server = try await median(runs) { _ = try await store.list(filter, limit: limit + 1, after: nil) }
            let reference = try await median(runs) { _ = try await database.query(planned, logger: logger) }
            timings.append(Timing(kind: kind, query: query, shape: shape?.rawValue ?? "planned", server: server, planned: reference))
        }
        return timings
    }

    /// The median of `runs` timed runs, in milliseconds, after one unmeasured.
    private static func median(_ runs: Int, _ body: () async throws -> Void) async throws -> Double {
        try await body()
        var times: [Double] = []
        for _ in 0..<runs {
            let start = ContinuousClock.now
            try await body()
            times.append((ContinuousClock.now - start).milliseconds)
        }
        return PairedThroughput.median(times)
    }

    static func table(_ timings: [Timing]) -> String {
        Table(rows: [["query word", "q", "server's statement", "server p50", "planned p50", "ratio (goal <= 10 x)"]] + timings.map {
            [$0.kind, $0.query, $0.shape, String(format: "%.2f ms", $0.server), String(format: "%.2f ms", $0.planned),
             String(format: "%.2f x", $0.ratio) + ($0.ratio <= goal ? "" : "  NO")]
        }).render()
    }

    static func results(_ timings: [Timing]) -> [ResultRow] {
        timings.map {
            ResultRow("library search, \($0.kind) \"\($0.query)\" (\($0.shape))", $0.server, "ms",
                      reference: String(format: "planned statement %.2f ms", $0.planned), ratio: $0.ratio,
                      goal: "<= 10 x", met: $0.ratio <= goal)
        }
    }
}
