import Accounts
import BookwormCore
import Catalog
import Foundation
import Logging
import Places
import PostgresNIO

/// Nearest-first searches. Distances are measured to each pin's public point only, so nothing
/// another user sees depends on where inside its cell a home really is. The GiST index on
/// public points yields pins nearest first (by their chord, which orders as the great-circle
/// distance does); the exact haversine decides inclusion.
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

    /// The chord to the origin on the unit sphere: the order of great-circle distance, and the
    /// very expression the index's nearest-neighbour scan orders by, so that a sort on it above
    /// the scan is incremental (homes sharing a cell's centre tie exactly and go by id).
    static let chord = "p.public_xyz <-> \(origin)"

    /// The great-circle distance in km of a unit-sphere `chord`: the haversine of the same two
    /// points (`bookworm_distance_km`) up to the last bits, from the chord the scan has already
    /// computed, where the haversine's dozen trigonometric calls per pin were 3 % of a central
    /// London page. Inclusion and the distance shown both come from it, so they agree.
    package static func chordKm(_ chord: String) -> String {
        "\(2 * Geo.earthRadiusKm) * asin(least(1, \(chord) / 2))"
    }

    /// `nearest`: the `$14` pins nearest to the origin from the cursor's distance on, not the
    /// caller's nor blocked either way (and every pin tied with the last, so each pin left out
    /// is strictly farther than each pin in); `near`: those within the radius. The radius is
    /// applied above the `LIMIT`, not as a box the index could search: given a box, the planner
    /// may read the whole radius by bitmap and sort it, which it did whenever it guessed the
    /// box small (a guess that grows with the table only; a city of 8,500 pins took 12 ms).
    /// Without one, the nearest-neighbour scan is its only ordered path, and a short page stops
    /// at `$14` pins even where the radius holds none. Both are inlined where they are read, so
    /// the scan yields pins only as the page above it asks for them. A suspended owner is left
    /// out copy by copy, not here: a filter on the owner's row in this scan made the planner
    /// give up the nearest-neighbour scan.
    /// The radius's chord (`$4`, a hair wide) is tested first, so that the distance runs only
    /// for pins at its edge or inside. Blocks are looked up only for pins inside it too: a pin
    /// outside counts towards `$14` either way, but every pin after it is outside as well, so
    /// `near` is the same; a search far from anyone probed `blocks` twice for each of its `$14`
    /// pins, 29 % of such a page. `ranked` numbers the pins as the cap counts them (`rank`), for
    /// the sentinel of `copiesSQL`.
    static func nearestPins(ranked: Bool) -> String {
        // `ROWS`: with the default frame, the window reads one pin ahead for its peers.
        let rank = ranked ? ",\n               row_number() OVER (ORDER BY \(chord) ROWS UNBOUNDED PRECEDING) AS rank" : ""
        return """
            WITH nearest AS NOT MATERIALIZED (
                SELECT p.id, p.owner_id, p.is_default, p.public_latitude, p.public_longitude, \(chord) AS chord\(rank)
                FROM pins p
                WHERE p.owner_id <> $8
                  AND (\(chord) > $4 OR \(BlocksStore.noBlockByProbes("$8", "p.owner_id")))
                  AND ($11::float8 IS NULL OR \(chord) >= $11)
                ORDER BY \(chord)
                FETCH FIRST $14 ROWS WITH TIES
            ), near AS NOT MATERIALIZED (
                SELECT nearest.*, km.distance FROM nearest
                CROSS JOIN LATERAL (SELECT \(chordKm("nearest.chord")) AS distance) km
                WHERE nearest.chord <= $4 AND km.distance <= $7
            )
            """
    }

    /// Nearest first, as a skilled PostGIS user writes it: the copies of `near`'s pins in
    /// (chord, copy id) order, an incremental sort that stops at the page, so a page that
    /// fills from the ten nearest pins reads ten pins. The candidates are copy ids only
    /// (index-only reads of `copies_pin_shown_idx` and `copies_owner_unpinned_shown_idx` when
    /// the request has no words or ISBN); copies, books and owners are joined for the page
    /// only. Parameters $1–$14 (`CopiesRoundTypes`); `filtered` is the shape for a request with
    /// words or an ISBN.
    ///
    /// Whether the page may be missing rows (`more`, as `inRounds` reads it) comes from a
    /// sentinel: the `$14`-th pin of the round, when it lies inside the radius, adds a row
    /// without a copy after its own copies, the last row of all (nothing in the round is
    /// farther). A full page never reaches it; a short one ends with it exactly when the round
    /// stopped at its cap inside the radius. Counting the page instead (`more`, as nearby owners
    /// still do) made PostgreSQL keep the page to count it: 2–4 % of a central London page in
    /// `psql`, and across the benchmark's 1,000 points the difference between 1.03–1.07 and
    /// 0.87–0.94 × best-practice PostGIS.
    static func copiesSQL(filtered: Bool) -> String {
        nearestPins(ranked: true) + """
            , page AS (
                SELECT placed.id, near.chord, near.distance, near.public_latitude, near.public_longitude
                FROM near CROSS JOIN LATERAL (\(placedCopies(filtered: filtered))
                    UNION ALL
                    SELECT NULL::uuid WHERE near.rank = $14) placed
                WHERE $11::float8 IS NULL OR placed.id IS NULL OR (near.chord, placed.id) > ($11, $12)
                ORDER BY near.chord, placed.id
                LIMIT $13
            )
            SELECT page.id IS NULL, CASE WHEN page.id IS NOT NULL THEN page.chord END,
                   page.distance, page.public_latitude, page.public_longitude, \(CopiesStore.columns)
            FROM page LEFT JOIN copies c ON c.id = page.id LEFT JOIN books b ON b.id = c.book_id
                 LEFT JOIN users u ON u.id = c.owner_id
            ORDER BY page.chord, page.id
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

    /// Pins a round of copies may read: where they are dense, a page fills from the pins it
    /// needs and reads no further; where they are sparse, a round reads this many and keeps
    /// those in the radius, so it is small (a page of copies takes ten pins in a city).
    package static func firstPinLimit(limit: Int) -> Int { max(32, limit) }

    /// The same for owners: twice the page, so that a page of owners with two pins each fills
    /// in one round.
    package static func firstOwnersPinLimit(limit: Int) -> Int { max(64, 2 * limit) }

    /// Whether a round's rows are the true page: a full page always is; a short one is, unless
    /// the round stopped at its pins (`more`).
    package static func isComplete(more: Bool, rows: Int, limit: Int) -> Bool { rows == limit || !more }

    /// One round in all but rare searches in dense places (see `firstPinLimit`), or a radius
    /// holding more than that many pins and fewer copies than a page.
    package func copies(_ query: NearbyQuery, after: DistanceCursor?, limit: Int) async throws -> [NearbyCopy] {
        let values = { (pinLimit: Int) in Self.roundValues(query, after: after, limit: limit, pinLimit: pinLimit) }
        if query.isFiltered {
            return try await inRounds(limit: limit, firstRound: Self.firstPinLimit(limit: limit),
                                      statement: { NearbyFilteredCopiesSQL(values: values($0)) }, row: Self.copy)
        }
        return try await inRounds(limit: limit, firstRound: Self.firstPinLimit(limit: limit),
                                  statement: { NearbyCopiesSQL(values: values($0)) }, row: Self.copy)
    }

    /// The rest of a row of `copiesSQL`, in the order of its `SELECT`.
    static func copy(_ cells: inout RowCells, chord: Double) throws -> NearbyCopy {
        let distance = try cells.next(Double.self)
        let place = PublicPlace(latitude: try cells.next(Double.self), longitude: try cells.next(Double.self))
        return NearbyCopy(copy: CopiesStore.view(try CopiesStore.row(&cells)), distanceKm: distance, sortKey: chord, place: place)
    }

    /// Runs `statement` for `firstRound` pins, then 8 times as many each round, until a
    /// round's rows prove the page complete (`isComplete`). On the generic plan, which
    /// `NearbyCrowdTests` holds to the page: its `LIMIT`s are costed as a tenth of the rows, so
    /// PostgreSQL found it dearer than each custom plan and planned every run anew (0.7 ms of
    /// planning for 0.4 of execution). A row's first cell says the round may be short (every
    /// row of owners, the sentinel of copies) and its second is the row's chord, null on a row
    /// with no data (the owners' meta row of an empty page, the copies' sentinel).
    func inRounds<Statement: PreparedSQL, Row>(
        limit: Int, firstRound: Int, statement: (Int) -> Statement, row: (inout RowCells, Double) throws -> Row) async throws -> [Row]
    {
        var pinLimit = firstRound
        while true {
            var result: [Row] = []
            var more = false
            for found in try await client.executeOnGenericPlan(statement(pinLimit), on: nil, logger: logger) {
                var cells = RowCells(found)
                more = try cells.next(Bool.self) || more
                guard let chord = try cells.next(Double?.self) else { continue }
                result.append(try row(&cells, chord))
                try cells.end()
            }
            if Self.isComplete(more: more, rows: result.count, limit: limit) { return result }
            pinLimit *= 8
        }
    }
}

/// The types of a round's parameters (`NearbyStore.roundValues`), given with the statement
/// since not every shape names them all.
enum CopiesRoundTypes {
    static let all: [PostgresDataType] = Array(repeating: .float8, count: 7)
        + [.uuid, .textArray, .text, .float8, .uuid, .int8, .int8]
}

/// `NearbyStore.copiesSQL`, prepared: the statement behind every nearby page without words or ISBN.
package struct NearbyCopiesSQL: PreparedSQL {
    package static let name = "bookworm_nearby_copies"
    package static let sql = NearbyStore.copiesSQL(filtered: false)
    package static var bindingDataTypes: [PostgresDataType] { CopiesRoundTypes.all }
    package let values: [SQLValue]

    package init(values: [SQLValue]) { self.values = values }
}

/// `NearbyStore.copiesSQL` for a request with words or an ISBN, prepared.
package struct NearbyFilteredCopiesSQL: PreparedSQL {
    package static let name = "bookworm_nearby_copies_filtered"
    package static let sql = NearbyStore.copiesSQL(filtered: true)
    package static var bindingDataTypes: [PostgresDataType] { CopiesRoundTypes.all }
    package let values: [SQLValue]

    package init(values: [SQLValue]) { self.values = values }
}
