import BookwormCore
import Foundation
import Logging
import PostgresNIO
import Synchronization

/// How many available copies a search's words probably match, from what `ANALYZE` keeps of
/// `copies.search` (its most common lexemes and their frequencies), so the server can choose a
/// library search's prepared shape without PostgreSQL planning the search on every request
/// (0.8–1.0 ms for this statement, more than the server's whole share of a request). The
/// estimate follows PostgreSQL's own for `@@` (`tsquery_opr_selec`): a listed lexeme has its
/// frequency, an unlisted one at most half the least listed (and, when the list has room
/// left, no more than `ANALYZE`'s own cutoff for listing: see `Figures.unlisted`), a prefix the sum of the listed
/// lexemes it starts, and the words of a query are taken as independent. The figures are read
/// again after `refreshAfter` of the app's clock.
package final class SearchFrequencies: Sendable {
    package struct Figures: Sendable {
        var lexemes: [String: Double]
        /// The same, sorted, so the lexemes a prefix starts are found by binary search.
        var sorted: [(lexeme: String, frequency: Double)]
        var rows: Double
        /// The share of copies a lexeme missing from the list is taken to match. PostgreSQL takes
        /// half the least listed one's, at most `defaultSelectivity`. A list shorter than its room
        /// (`listRoom`, ten lexemes per unit of the statistics target) holds every lexeme above
        /// `ANALYZE`'s cutoff (`ts_typanalyze`: nine occurrences per bucket of about 144,000
        /// lexemes at the default target), so one missing from it is rarer than that: about 3 in
        /// 10,000 copies at five lexemes a copy. A typo then reads the words' index instead of
        /// every copy newest first (256 ms at 1,000,000 copies).
        var unlisted: Double

        /// `frequencies` as `pg_stats.most_common_elem_freqs` gives them (the listed lexemes' first).
        init?(lexemes: [String], frequencies: [Double], rows: Double, listRoom: Int) {
            guard rows >= 0, !lexemes.isEmpty, frequencies.count >= lexemes.count else { return nil }
            self.lexemes = Dictionary(zip(lexemes, frequencies.prefix(lexemes.count)), uniquingKeysWith: max)
            sorted = self.lexemes.map { (lexeme: $0.key, frequency: $0.value) }.sorted { $0.lexeme < $1.lexeme }
            self.rows = rows
            let leastListed = self.lexemes.values.min() ?? SearchFrequencies.defaultSelectivity
            let postgres = min(SearchFrequencies.defaultSelectivity, leastListed / 2)
            unlisted = lexemes.count < listRoom ? min(postgres, 0.0003) : postgres
        }
    }

    private struct State {
        var figures: Figures?
        /// When the figures were last read, found or not (a table never analysed has none).
        var readAt: Date?
        var reading = false
    }

    private let state = Mutex(State())
    private let clock: any AppClock
    static let refreshAfter: TimeInterval = 600
    /// PostgreSQL's `DEFAULT_TS_MATCH_SEL`: what it assumes of a lexeme it knows nothing of.
    static let defaultSelectivity = 0.005

    package init(clock: any AppClock) {
        self.clock = clock
    }

    /// How a search for `words` should run; nil before the table has statistics.
    package func shape(_ words: [String], limit: Int, client: Database, logger: Logger) async -> LibrarySearchShape? {
        guard let figures = await current(client: client, logger: logger) else { return nil }
        return LibrarySearchShape.choose(matches: Self.estimate(words, figures), rows: figures.rows, limit: limit)
    }

    /// The copies `words` (the last one a prefix) probably match, and the copies there are;
    /// nil before the table has statistics.
    func estimate(_ words: [String], client: Database, logger: Logger) async -> (matches: Double, rows: Double)? {
        guard let figures = await current(client: client, logger: logger) else { return nil }
        return (Self.estimate(words, figures), figures.rows)
    }

    static func estimate(_ words: [String], _ figures: Figures) -> Double {
        let unlisted = figures.unlisted
        var selectivity = 1.0
        for (index, word) in words.enumerated() {
            let lexeme = fold(word)
            if index == words.count - 1 {
                // A prefix of one or two letters starts lexemes that are each too rare to be
                // listed, yet together common: taken as common (newest first).
                guard lexeme.count > 2 else { continue }
                selectivity *= max(figures.listed(startingWith: lexeme), unlisted)
            } else {
                selectivity *= figures.lexemes[lexeme] ?? unlisted
            }
        }
        return figures.rows * selectivity
    }

    /// Near enough to `bookworm_fold` (lower-case, accents off) for a lexeme's statistics.
    static func fold(_ word: String) -> String {
        word.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil).lowercased()
    }

    private func current(client: Database, logger: Logger) async -> Figures? {
        let now = clock.now()
        let (figures, read) = state.withLock { state -> (Figures?, Bool) in
            let stale = state.readAt.map { now.timeIntervalSince($0) >= Self.refreshAfter } ?? true
            guard stale, !state.reading else { return (state.figures, false) }
            state.reading = true
            return (state.figures, true)
        }
        guard read else { return figures }
        let fresh: Figures??
        do {
            fresh = .some(try await Self.read(client: client, logger: logger))
        } catch {
            logger.warning("search statistics not read", metadata: ["error": .string(String(reflecting: error))])
            fresh = nil
        }
        return state.withLock { state in
            state.reading = false
            if let fresh {
                state.figures = fresh
                state.readAt = now
            }
            return state.figures
        }
    }

    private static func read(client: Database, logger: Logger) async throws -> Figures? {
        let rows = try await client.query("""
            SELECT coalesce(s.most_common_elems::text::text[], '{}'), coalesce(s.most_common_elem_freqs, '{}'), c.reltuples::float8,
                   10 * (CASE WHEN a.attstattarget >= 0 THEN a.attstattarget
                              ELSE current_setting('default_statistics_target')::int END)::int8
            FROM pg_class c
            JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'search'
            LEFT JOIN pg_stats s ON s.schemaname = current_schema() AND s.tablename = 'copies' AND s.attname = 'search'
            WHERE c.oid = 'copies'::regclass
            """, logger: logger)
        for try await (lexemes, frequencies, rows, room) in rows.decode(([String], [Float], Double, Int).self) {
            // Never analysed (reltuples -1) or without a listed lexeme: nothing to go on.
            return Figures(lexemes: lexemes, frequencies: frequencies.map(Double.init), rows: rows, listRoom: room)
        }
        return nil
    }
}

extension SearchFrequencies.Figures {
    /// The summed frequencies of the listed lexemes that start with `prefix`: they sit together
    /// in `sorted`, from the first that is not less than `prefix`.
    func listed(startingWith prefix: String) -> Double {
        var low = 0, high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle].lexeme < prefix { low = middle + 1 } else { high = middle }
        }
        var sum = 0.0
        while low < sorted.count, sorted[low].lexeme.hasPrefix(prefix) {
            sum += sorted[low].frequency
            low += 1
        }
        return sum
    }
}
