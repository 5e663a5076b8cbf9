import Accounts
import BookwormCore
import Catalog
import Foundation
import Logging
import Places
import PostgresNIO

/// Nearest-first searches. Distances are measured to each pin's public point only, so nothing
/// another user sees depends on where inside its cell a home really is. The box prefilter
/// uses the GiST index on public points; the exact haversine decides inclusion and order.
package struct NearbyStore: Sendable {
    package let client: Database
    package let logger: Logger

    package init(client: Database, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// The unit-sphere point of `origin` and the chord that matches `radiusKm` (a hair wider,
    /// so float rounding never drops an edge pin: the haversine decides inclusion).
    static func sphereValues(_ query: NearbyQuery) -> [SQLValue] {
        let lat = query.origin.latitude * .pi / 180, lon = query.origin.longitude * .pi / 180
        let chord = 2 * sin(min(Double.pi, query.radiusKm / Geo.earthRadiusKm) / 2) + 1e-9
        return [.double(cos(lat) * cos(lon)), .double(cos(lat) * sin(lon)), .double(sin(lat)), .double(chord)]
    }

    static let origin = "cube(ARRAY[$1, $2, $3]::float8[])"

    /// The chord to 1e-12 (6 µm on the ground): two places at the same great-circle distance
    /// can differ in the last bits of their chords, and must still tie (and be ordered by id).
    static let roundedChord = "floor((p.public_xyz <-> \(origin)) * 1e12 + 0.5) / 1e12"

    /// Pins in the radius, not the caller's nor blocked either way, past the cursor's distance.
    /// A suspended owner is left out copy by copy in `placedCopies`, not here: a filter on the owner's
    /// row in this scan made the planner give up the nearest-neighbour index scan (0.8 → 40 ms).
    static let candidatePins = pinsInRadius + """

                  AND ($11::float8 IS NULL OR \(roundedChord) >= $11)
        """

    /// Pins in the radius, not the caller's nor blocked either way.
    static let pinsInRadius = """
                FROM pins p
                WHERE p.public_xyz <@ cube_enlarge(\(origin), $4, 3)
                  AND bookworm_distance_km($5, $6, p.public_latitude, p.public_longitude) <= $7
                  AND p.owner_id <> $8
                  AND \(BlocksStore.noBlockBetween("$8", "p.owner_id"))
        """

    /// Nearest first by the index's nearest-neighbour scan over unit-sphere points: `near` is
    /// the `pinLimit` nearest pins (with every pin tied with the last, as home pins in one cell
    /// share its centre), and their copies are ordered by (chord, copy id), which is the
    /// great-circle order. `beyond` is the nearest pin left out: nothing it or any farther pin
    /// holds can come before its chord, so a full page ending before it is the true page (see
    /// `isComplete`). The candidates are copy ids only (index-only reads of
    /// `copies_pin_shown_idx` and `copies_owner_unpinned_shown_idx` when the request has no
    /// words or ISBN); copies, books and owners are joined for the page only. The last tie group
    /// of `near` (which may be hundreds of homes at one cell's centre) is read only when the
    /// pins before it leave the page short. The meta row (`beyond`'s chord, or null when every
    /// pin in the radius was tried) comes back even when the page is empty. Parameters $1–$14;
    /// `filtered` is the shape for a request with words or an ISBN.
    static func copiesSQL(filtered: Bool) -> String {
        nearestPins(candidatePins, columns: "p.public_latitude, p.public_longitude") + """
            , last AS (
                -- $9 and $10 are named in every shape, so that both shapes take the same parameters.
                SELECT max(chord) AS chord, $9::text[] AS words, $10::text AS isbn FROM near
            ), head AS (
                SELECT placed.id, near.chord, near.public_latitude, near.public_longitude
                FROM near CROSS JOIN LATERAL (\(placedCopies(filtered: filtered))) placed
                WHERE near.chord < (SELECT chord FROM last)
                  AND ($11::float8 IS NULL OR (near.chord, placed.id) > ($11, $12))
                ORDER BY near.chord, placed.id
                LIMIT $13
            ), tail AS (
                SELECT placed.id, near.chord, near.public_latitude, near.public_longitude
                FROM near CROSS JOIN LATERAL (\(placedCopies(filtered: filtered))) placed
                WHERE near.chord = (SELECT chord FROM last) AND (SELECT count(*) FROM head) < $13
                  AND ($11::float8 IS NULL OR (near.chord, placed.id) > ($11, $12))
                ORDER BY placed.id
                LIMIT $13
            ), page AS (
                SELECT * FROM head UNION ALL SELECT * FROM tail
                ORDER BY chord, id
                LIMIT $13
            ), meta AS (
                SELECT (SELECT chord FROM beyond) AS boundary
            )
            SELECT meta.boundary, page.chord,
                   bookworm_distance_km($5, $6, page.public_latitude, page.public_longitude), page.public_latitude, page.public_longitude,
                   \(CopiesStore.columns)
            FROM meta LEFT JOIN (page JOIN copies c ON c.id = page.id JOIN books b ON b.id = c.book_id
                                 JOIN users u ON u.id = c.owner_id) ON true
            ORDER BY page.chord, c.id
            """
    }

    /// The ids of the available, shown copies a pin of `near` places: its own, and for a default
    /// pin its owner's copies without a pin. Unfiltered, every column read is in the partial
    /// indexes, so no copy row is visited; filtered adds the request's words and ISBN.
    static func placedCopies(filtered: Bool) -> String {
        let filters = filtered ? """

                      AND ($9::text[] IS NULL OR c.search @@ bookworm_search_query($9))
                      AND ($10::text IS NULL OR c.book_id IN (SELECT id FROM books WHERE isbn13 = $10))
            """ : ""
        return """

                    SELECT c.id FROM copies c
                    WHERE c.pin_id = near.id AND c.status = 'available' AND \(Visibility.shown("c", owner: "owner_id"))\(filters)
                    UNION ALL
                    SELECT c.id FROM copies c
                    WHERE near.is_default AND c.owner_id = near.owner_id AND c.pin_id IS NULL AND c.status = 'available'
                      AND \(Visibility.shown("c", owner: "owner_id"))\(filters)
                """
    }

    /// `near`, the `$14` nearest of `pins` with every pin tied with the last (id, owner, default
    /// flag, `columns`, chord), and `beyond`, the nearest of `pins` left out: a round's two halves,
    /// for copies and owners alike. One nearest-neighbour scan yields both: it fetches one pin
    /// more than `near` (with that pin's ties), and the first fetched pin past the `$14`-th's
    /// distance is `beyond`. Only when that extra pin ties with the `$14`-th (home pins sharing a
    /// cell's centre) is `beyond` looked for by a second scan; otherwise that scan never runs.
    static func nearestPins(_ pins: String, columns: String) -> String {
        """
            WITH fetched AS MATERIALIZED (
                SELECT p.id, p.owner_id, p.is_default, \(columns), \(roundedChord) AS chord,
                       p.public_xyz <-> \(origin) AS exact
                \(pins)
                ORDER BY p.public_xyz <-> \(origin)
                FETCH FIRST ($14 + 1) ROWS WITH TIES
            ), cut AS (
                SELECT (SELECT exact FROM fetched ORDER BY exact OFFSET ($14 - 1) LIMIT 1) AS exact,
                       (SELECT count(*) FROM fetched) > $14 AS more
            ), near AS (
                SELECT fetched.* FROM fetched, cut WHERE cut.exact IS NULL OR fetched.exact <= cut.exact
            ), beyond AS (
                (SELECT fetched.chord FROM fetched, cut WHERE fetched.exact > cut.exact ORDER BY fetched.exact LIMIT 1)
                UNION ALL
                (SELECT \(roundedChord) AS chord
                \(pins)
                  AND (SELECT more FROM cut) AND NOT EXISTS (SELECT 1 FROM fetched, cut WHERE fetched.exact > cut.exact)
                  AND p.public_xyz <-> \(origin) > (SELECT exact FROM cut)
                ORDER BY p.public_xyz <-> \(origin)
                LIMIT 1)
            )
            """
    }

    /// A round's parameters $1–$14, the same for copies and owners and for either shape.
    static func roundValues(_ query: NearbyQuery, after: DistanceCursor?, limit: Int, pinLimit: Int) -> [SQLValue] {
        sphereValues(query) + [
            .double(query.origin.latitude), .double(query.origin.longitude), .double(query.radiusKm), .uuid(query.callerID),
            .textArray(query.words), .text(query.isbn13), .double(after?.distance), .uuid(after?.id), .int(limit), .int(pinLimit),
        ]
    }

    /// A round of copies as text and values (the text built once per shape, not per request).
    package static func copiesStatement(_ query: NearbyQuery, after: DistanceCursor?, limit: Int, pinLimit: Int) -> SQLStatement {
        SQLStatement(sql: query.isFiltered ? NearbyFilteredCopiesSQL.sql : NearbyCopiesSQL.sql,
                     values: roundValues(query, after: after, limit: limit, pinLimit: pinLimit))
    }

    /// Pins tried in the first round. With 16, 142 of the nearby benchmark's 1,000 city pages of
    /// 50 needed a second round; with 32, none did. The copies of pins a page does not reach cost
    /// index entries only, and the last tie group is read only when needed.
    package static let firstPinLimit = 32

    /// Owners: a page of `limit` owners needs at least as many pins, and an owner often has two
    /// in the radius (a home and a meetup place), so the first round takes half as many again.
    package static func firstOwnersPinLimit(limit: Int) -> Int { max(firstPinLimit, (limit + 1) * 3 / 2) }

    /// Whether a page drawn from the pins tried is the true page: either they were every pin
    /// in the radius (no `boundary`), or the page is full and ends strictly before the nearest
    /// pin not tried (which, like every pin farther out, could only add later rows).
    package static func isComplete(boundary: Double?, rows: Int, lastChord: Double?, limit: Int) -> Bool {
        guard let boundary else { return true }
        guard rows == limit, let lastChord else { return false }
        return lastChord < boundary
    }

    /// Rounds of 32, 256, 2,048… nearest pins (and their ties) until the page is provably
    /// complete; one round in all but sparse cases.
    package func copies(_ query: NearbyQuery, after: DistanceCursor?, limit: Int) async throws -> [NearbyCopy] {
        let values = { (pinLimit: Int) in Self.roundValues(query, after: after, limit: limit, pinLimit: pinLimit) }
        if query.isFiltered {
            return try await inRounds(limit: limit, firstRound: Self.firstPinLimit, statement: { NearbyFilteredCopiesSQL(values: values($0)) },
                                      row: Self.copy)
        }
        return try await inRounds(limit: limit, firstRound: Self.firstPinLimit, statement: { NearbyCopiesSQL(values: values($0)) },
                                  row: Self.copy)
    }

    static func copy(_ cells: PostgresRandomAccessRow, chord: Double) throws -> NearbyCopy {
        NearbyCopy(copy: CopiesStore.view(try CopiesStore.row(cells, from: 5)), distanceKm: try cells[2].decode(Double.self),
                   sortKey: chord, place: PublicPlace(latitude: try cells[3].decode(Double.self), longitude: try cells[4].decode(Double.self)))
    }

    /// Runs `statement` for 32 nearest pins, then 8 times as many each round, until a round's
    /// rows prove the page complete (`isComplete`). Every row's first cell is `beyond`'s chord and
    /// its second the row's chord, null on the meta row that comes back alone for an empty page.
    func inRounds<Statement: PreparedSQL, Row>(
        limit: Int, firstRound: Int, statement: (Int) -> Statement, row: (PostgresRandomAccessRow, Double) throws -> Row) async throws -> [Row]
    {
        var pinLimit = firstRound
        while true {
            var result: [Row] = []
            var boundary: Double?, lastChord: Double?
            for found in try await client.execute(statement(pinLimit), logger: logger) {
                let cells = PostgresRandomAccessRow(found)
                boundary = try cells[0].decode(Double?.self)
                guard let chord = try cells[1].decode(Double?.self) else { continue }
                result.append(try row(cells, chord))
                lastChord = chord
            }
            if Self.isComplete(boundary: boundary, rows: result.count, lastChord: lastChord, limit: limit) {
                return result
            }
            pinLimit *= 8
        }
    }
}

/// `NearbyStore.copiesSQL`, prepared: the statement behind every nearby page without words or ISBN.
package struct NearbyCopiesSQL: PreparedSQL {
    package static let sql = NearbyStore.copiesSQL(filtered: false)
    package let values: [SQLValue]

    package init(values: [SQLValue]) { self.values = values }
}

/// `NearbyStore.copiesSQL` for a request with words or an ISBN, prepared.
package struct NearbyFilteredCopiesSQL: PreparedSQL {
    package static let sql = NearbyStore.copiesSQL(filtered: true)
    package let values: [SQLValue]

    package init(values: [SQLValue]) { self.values = values }
}
