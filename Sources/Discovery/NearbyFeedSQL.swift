import Accounts
import BookwormCore
import Places
import PostgresNIO

/// The nearby feed's statements: by grid cell (migration 0017) when few cells cover the radius,
/// by the filter's own index for one author or book, by the pins in the radius otherwise.
extension PostsStore {
    static func nearbyStatement(_ filter: FeedFilter, after: Cursor?, near: NearbyArea, filters: [SQLValue])
        -> (statement: SQLStatement, grid: FeedGridShape?)
    {
        if filter.author != nil || filter.bookID != nil {
            // One author's or one book's posts are few: their own index, newest first, with the
            // distance checked on each.
            return (SQLStatement(sql: """
                SELECT \(columns), \(Self.distance) \(joins)
                WHERE \(conditions) AND po.cell IS NOT NULL AND \(Self.distance) <= $10
                ORDER BY po.created_at DESC, po.id DESC
                LIMIT $6
                """, values: filters + Self.areaValues(near, boxes: false)), nil)
        }
        guard let covering = FeedGrid.covering(near) else { return (pinsStatement(conditions, filters, near), nil) }
        let regions = covering.level.column != "cell"
        let shape = FeedGridShape(regions: regions, kind: filter.kind != nil, cursor: after != nil,
                                  points: !regions && covering.inner.isEmpty)
        return (SQLStatement(sql: gridText(shape), values: filters + Self.areaValues(near, boxes: false) + [.int64Array(covering.inner)]
                             + Self.bandValues(near) + [.int64Array(covering.edge)]), shape)
    }

    /// A shape's text, built once rather than on every request.
    static func gridText(_ shape: FeedGridShape) -> String { gridTexts[shape] ?? text(shape) }

    private static func text(_ shape: FeedGridShape) -> String {
        shape.points ? pointsSQL(shape) : (shape.regions ? RegionFeedSQL.text(shape) : gridSQL(shape))
    }

    private static let gridTexts = Dictionary(uniqueKeysWithValues: [(false, false), (true, false), (false, true)].flatMap { regions, points in
        [false, true].flatMap { kind in
            [false, true].map { cursor in
                let shape = FeedGridShape(regions: regions, kind: kind, cursor: cursor, points: points)
                return (shape, text(shape))
            }
        }
    })

    /// Each covering cell's posts newest first, each read only until it has a page inside the
    /// radius; the newest page of those is the answer. The inner cells ($11) are read first; when
    /// they fill a page, the edge cells ($18), which the circle only clips, are read only back to
    /// that page's oldest post, since nothing older can make the page. Before, a dense edge cell
    /// with fewer than a page inside was read to its end, and that grew with the city. Authors
    /// and books are joined for the page alone. Only the filters the shape has are in the text:
    /// with `$1 IS NULL OR …` tests in it, PostgreSQL's generic plan read every post of each cell
    /// and sorted them (0.5 s in central London), and without them the generic plan is the one a
    /// custom plan would be.
    private static func gridSQL(_ shape: FeedGridShape) -> String {
        """
        WITH inner_hits AS (
            \(gridHits(shape, cells: "$11", since: nil))
        ), horizon AS (
            SELECT CASE WHEN count(*) = $6 THEN min(created_at) END AS since FROM inner_hits
        ), edge_hits AS (
            \(gridHits(shape, cells: "$18", since: sinceHorizon))
        ), page AS (
            SELECT * FROM inner_hits UNION ALL SELECT * FROM edge_hits
            ORDER BY created_at DESC, id DESC
            LIMIT $6
        )
        \(pageDetails)
        """
    }

    /// The inner cells' page's oldest post, when they fill a page: nothing older can make it.
    static let sinceHorizon = "coalesce((SELECT since FROM horizon), '-infinity')"

    /// A radius that no cell lies mostly inside (all its cells, $18, are edge cells): the
    /// public points holding posts in those cells (migration 0023) that are inside the radius,
    /// each point's posts newest first, the newest page of those. A dense cell's posts at points
    /// outside the circle are never read; a cell's points are read within the radius's bounding
    /// box ($12–$17, by the key's latitude) before the haversine. The inner cells ($11) are none.
    private static func pointsSQL(_ shape: FeedGridShape) -> String {
        """
        WITH points AS MATERIALIZED (
            SELECT pp.latitude, pp.longitude FROM post_points pp
            WHERE pp.cell = ANY($18::int8[]) AND pp.latitude BETWEEN $12 AND $13
              AND (pp.longitude BETWEEN $14 AND $15 OR pp.longitude BETWEEN $16 AND $17)
              AND bookworm_distance_km($8, $9, pp.latitude, pp.longitude) <= $10
        ), page AS (
            SELECT hit.*
            FROM points CROSS JOIN LATERAL (
                SELECT po.id, po.created_at, \(distance) AS distance
                FROM posts po
                WHERE po.public_latitude = points.latitude AND po.public_longitude = points.longitude AND po.cell IS NOT NULL
                  AND \(filters(shape, since: nil).joined(separator: "\n          AND "))
                ORDER BY po.created_at DESC, po.id DESC
                LIMIT $6
            ) hit
            ORDER BY hit.created_at DESC, hit.id DESC
            LIMIT $6
        )
        \(pageDetails)
        """
    }

    /// The page's posts, authors and books, joined for the page's ids alone.
    static let pageDetails = """
        SELECT \(columns), page.distance
        FROM page JOIN posts po ON po.id = page.id JOIN users u ON u.id = po.author_id LEFT JOIN books b ON b.id = po.book_id
        ORDER BY page.created_at DESC, page.id DESC
        """

    /// What a hit must pass besides its place: the shape's kind and cursor, blocks, visibility.
    static func filters(_ shape: FeedGridShape, since: String?) -> [String] {
        (since.map { ["po.created_at >= \($0)"] } ?? []) + (shape.kind ? [kindCondition] : [])
            + (shape.cursor ? [cursorCondition] : []) + [blockCondition, visibleCondition]
    }

    /// A page of hits from each cell of `cells`, newest first, none older than `since`; a hit is
    /// read from the cell's index alone (migration 0020).
    private static func gridHits(_ shape: FeedGridShape, cells: String, since: String?) -> String {
        let tests = filters(shape, since: since)
        return """
            SELECT hit.*
                FROM unnest(\(cells)::int8[]) AS area(cell) CROSS JOIN LATERAL (
                    SELECT po.id, po.created_at, \(distance) AS distance
                    FROM posts po
                    WHERE po.cell = area.cell AND CASE WHEN \(band) THEN \(distance) END <= $10
                      AND \(tests.joined(separator: "\n              AND "))
                    ORDER BY po.created_at DESC, po.id DESC
                    LIMIT $6
                ) hit
                ORDER BY hit.created_at DESC, hit.id DESC
                LIMIT $6
            """
    }

    /// A grid read, prepared under its shape's own name, run on its generic plan; on
    /// `connection` when the caller has a transaction open there.
    func gridRows(_ shape: FeedGridShape, _ values: [SQLValue], on connection: PostgresConnection?) async throws -> [PostgresRow] {
        try await gridRows(gridFlag(shape.regions), gridFlag(shape.kind), gridFlag(shape.cursor), gridFlag(shape.points), values,
                           on: connection)
    }

    private func gridRows<Regions: GridFlag, Kind: GridFlag, After: GridFlag, Points: GridFlag>(
        _: Regions.Type, _: Kind.Type, _: After.Type, _: Points.Type, _ values: [SQLValue], on connection: PostgresConnection?
    ) async throws -> [PostgresRow] {
        // PostgreSQL's cost model takes a `LIMIT $n` to keep a tenth of the rows, so it would
        // plan every run afresh (0.6 ms of central London's 1.1) although the generic plan is as
        // good: `everyGridReadsGenericPlanStopsAtThePageInADenseCell` holds it to that.
        try await client.executeOnGenericPlan(FeedGridSQL<Regions, Kind, After, Points>(values: values), on: connection, logger: logger)
    }

    /// The statement before the grid, and still the one for radii no grid covers in few cells:
    /// the benchmark's reference for the same ids.
    package static func nearbyByPinsStatement(_ filter: FeedFilter, limit: Int, after: Cursor?) -> SQLStatement? {
        filter.near.map { pinsStatement(conditions, filterValues(filter, limit: limit, after: after), $0) }
    }

    /// To the post's copy of its pin's public point (kept equal to the pin's by triggers).
    static let distance = "bookworm_distance_km($8, $9, po.public_latitude, po.public_longitude)"

    /// The radius's bounding box, $12–$17 (south, north, then west and east of each of two
    /// longitude ranges, one given twice unless the circle crosses the antimeridian). A circle
    /// that clips a dense cell reads that cell's entries to its end; a few comparisons turn most
    /// of them away before the haversine, which cost 0.3 µs an entry (16,600 entries, 5.6 ms, at
    /// the benchmark's slowest point). It sits inside the distance's `CASE`, not beside it: as
    /// quals of their own, the generic plan guessed they kept a two-hundredth of a cell and read
    /// whole cells by bitmap and sorted them (10 ms at p50).
    static let band = """
        po.public_latitude BETWEEN $12 AND $13
                      AND (po.public_longitude BETWEEN $14 AND $15 OR po.public_longitude BETWEEN $16 AND $17)
        """

    static func bandValues(_ area: NearbyArea) -> [SQLValue] {
        let boxes = Geo.boundingBoxes(around: area.origin, radiusKm: area.radiusKm)
        let first = boxes[0], second = boxes.count > 1 ? boxes[1] : boxes[0]
        return [.double(first.south), .double(first.north), .double(first.west), .double(first.east),
                .double(second.west), .double(second.east)]
    }

    /// A radius no grid covers in few cells: the pins within it first (box from the covering GiST
    /// index, exact haversine decides), then their posts newest first.
    private static func pinsStatement(_ conditions: String, _ filters: [SQLValue], _ near: NearbyArea) -> SQLStatement {
        SQLStatement(sql: """
            WITH near AS MATERIALIZED (
                SELECT p.id, bookworm_distance_km($8, $9, p.public_latitude, p.public_longitude) AS distance
                FROM pins p
                WHERE \(Self.boxFilter)
                  AND bookworm_distance_km($8, $9, p.public_latitude, p.public_longitude) <= $10
            ), page AS (
                SELECT po.id, near.distance FROM posts po JOIN near ON near.id = po.pin_id
                WHERE \(conditions)
                ORDER BY po.created_at DESC, po.id DESC
                LIMIT $6
            )
            SELECT \(columns), page.distance
            FROM page JOIN posts po ON po.id = page.id JOIN users u ON u.id = po.author_id LEFT JOIN books b ON b.id = po.book_id
            ORDER BY po.created_at DESC, po.id DESC
            """, values: filters + Self.areaValues(near, boxes: true))
    }

    static let boxFilter = RadiusBoxes.filter(firstParameter: 11)

    static func areaValues(_ area: NearbyArea, boxes: Bool) -> [SQLValue] {
        [.double(area.origin.latitude), .double(area.origin.longitude), .double(area.radiusKm)]
            + (boxes ? RadiusBoxes.values(around: area.origin, radiusKm: area.radiusKm) : [])
    }
}

/// Which grid a nearby feed page reads (by cell, by region, or by the points of clipped cells),
/// and which optional filters its statement text has.
package struct FeedGridShape: Sendable, Hashable {
    let regions: Bool
    let kind: Bool
    let cursor: Bool
    /// Every covering cell is an edge cell (`PostsStore.pointsSQL`).
    var points = false
}

/// A type-level yes or no, so that each grid shape is a prepared statement type of its own.
protocol GridFlag { static var on: Bool { get } }
enum GridYes: GridFlag { static var on: Bool { true } }
enum GridNo: GridFlag { static var on: Bool { false } }

func gridFlag(_ on: Bool) -> any GridFlag.Type { on ? GridYes.self : GridNo.self }

/// `PostsStore.gridText` for one shape (`gridSQL`, `RegionFeedSQL` or `pointsSQL`), prepared
/// once per pooled connection. The parameter types are given because a shape's text leaves some
/// of the filters' parameters unused.
struct FeedGridSQL<Regions: GridFlag, Kind: GridFlag, After: GridFlag, Points: GridFlag>: PreparedSQL {
    static var name: String {
        feedGridNames[(Regions.on ? 8 : 0) | (Kind.on ? 4 : 0) | (After.on ? 2 : 0) | (Points.on ? 1 : 0)]
    }
    static var sql: String {
        PostsStore.gridText(FeedGridShape(regions: Regions.on, kind: Kind.on, cursor: After.on, points: Points.on))
    }
    static var bindingDataTypes: [PostgresDataType] {
        [.text, .text, .uuid, .int8, .uuid, .int8, .uuid, .float8, .float8, .float8, .int8Array]
            + Array(repeating: .float8, count: 6) + [.int8Array]
    }
    let values: [SQLValue]
}

/// `FeedGridSQL.name` of each shape, built once rather than on every run (PostgresNIO reads it each time).
private let feedGridNames: [String] = (0..<16).map { bits in
    let flags = [8, 4, 2, 1].map { bits & $0 != 0 ? "true" : "false" }
    return "bookworm_feed_grid_" + flags.joined(separator: "_")
}
