import Accounts
import BookwormCore
import Places

/// The nearby feed's statements: by grid cell (migration 0017) when few cells cover the radius,
/// by the filter's own index for one author or book, by the pins in the radius otherwise.
extension PostsStore {
    static func nearbyStatement(_ filter: FeedFilter, near: NearbyArea, filters: [SQLValue]) -> SQLStatement {
        if filter.author != nil || filter.bookID != nil {
            // One author's or one book's posts are few: their own index, newest first, with the
            // distance checked on each.
            return SQLStatement(sql: """
                SELECT \(columns), \(Self.distance) \(joins)
                WHERE \(conditions) AND po.cell IS NOT NULL AND \(Self.distance) <= $10
                ORDER BY po.created_at DESC, po.id DESC
                LIMIT $6
                """, values: filters + Self.areaValues(near, boxes: false))
        }
        guard let (level, cells) = FeedGrid.covering(near) else { return pinsStatement(conditions, filters, near) }
        return SQLStatement(sql: level.column == "cell" ? cellsSQL : regionsSQL, values: filters + Self.areaValues(near, boxes: false) + [.int64Array(cells)])
    }

    // Not prepared: PostgreSQL's generic plan for these reads every post of each cell and sorts
    // them (0.5 s in central London); the plan made for the actual cells is the right one.
    static let cellsSQL = gridSQL(column: "cell")
    static let regionsSQL = gridSQL(column: "region")

    /// Each covering cell's posts newest first, each read only until it has a page inside the
    /// radius; the newest page of those is the answer. Authors and books are joined for it alone.
    static func gridSQL(column: String) -> String {
        // The hits carry the post's own columns, so only authors and books are joined after:
        // one join fewer to plan, on a statement whose planning costs more than its run.
        """
        WITH page AS (
            SELECT hit.*
            FROM unnest($11::int8[]) AS area(cell) CROSS JOIN LATERAL (
                SELECT po.id, po.kind, po.body, po.copy_id, po.created_at, po.author_id, po.book_id, \(distance) AS distance
                FROM posts po
                WHERE po.\(column) = area.cell AND \(distance) <= $10 AND \(conditions)
                ORDER BY po.created_at DESC, po.id DESC
                LIMIT $6
            ) hit
            ORDER BY hit.created_at DESC, hit.id DESC
            LIMIT $6
        )
        SELECT page.id, page.kind, page.body, page.copy_id, page.created_at,
               (EXTRACT(EPOCH FROM page.created_at) * 1000000)::int8,
               u.id, u.username, u.display_name, b.id, b.isbn13, b.title, b.authors, page.distance
        FROM page JOIN users u ON u.id = page.author_id LEFT JOIN books b ON b.id = page.book_id
        ORDER BY page.created_at DESC, page.id DESC
        """
    }

    /// The statement before the grid, and still the one for radii no grid covers in few cells:
    /// the benchmark's reference for the same ids.
    package static func nearbyByPinsStatement(_ filter: FeedFilter, limit: Int, after: Cursor?) -> SQLStatement? {
        filter.near.map { pinsStatement(conditions, filterValues(filter, limit: limit, after: after), $0) }
    }

    /// To the post's copy of its pin's public point (kept equal to the pin's by triggers).
    static let distance = "bookworm_distance_km($8, $9, po.public_latitude, po.public_longitude)"

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
