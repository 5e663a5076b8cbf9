/// The nearby feed by 1° regions, for radii too wide for 0.1° cells (`FeedGrid.levels`).
///
/// As by cells, each region is read newest first until it has a page inside the radius, inner
/// regions first, and the edge regions back to the inner regions' page. But a region is also
/// where a dense city outside the circle lies: the circle's edge clips the region, or a fifth of
/// it is inside, and the city's posts come first in the region's order. Read back to a page
/// inside the circle, that was most of the city (7 to 17 ms at 1M posts for circles of 120 to
/// 300 km whose edge passes beside London). So a region is read no further than `scanCap`
/// posts; one that gets there without a page inside is read on, from that post, by its 0.1°
/// cells the circle can reach, each newest first. The city's cells lie outside the circle and
/// are never read.
enum RegionFeedSQL {
    /// Posts a region is read through before its cells take over: enough that a region holding
    /// posts inside the circle at one in twenty-five of its own finishes by itself.
    static let scanCap = 500

    static func text(_ shape: FeedGridShape) -> String {
        """
        WITH inner_scan AS MATERIALIZED (
            \(regionScan(shape, regions: "$11", since: nil))
        ), inner_hits AS (
            SELECT id, created_at, distance FROM inner_scan WHERE NOT capped
            ORDER BY created_at DESC, id DESC
            LIMIT $6
        ), horizon AS (
            SELECT CASE WHEN count(*) = $6 THEN min(created_at) END AS since FROM inner_hits
        ), edge_scan AS MATERIALIZED (
            \(regionScan(shape, regions: "$18", since: PostsStore.sinceHorizon))
        ), capped AS (
            SELECT region, created_at, id FROM inner_scan WHERE capped
            UNION ALL SELECT region, created_at, id FROM edge_scan WHERE capped
        ), candidate_cells AS (
            -- A region's cells are rows and columns 10 × its own, and one either side: a point on
            -- the region's border can fall in the next cell by the division's rounding.
            SELECT capped.*, (capped.region / 100000 * 10 + i) * 100000 + capped.region % 100000 * 10 + j AS cell,
                   ((capped.region / 100000 * 10 + i)::float8 + 0.5) * 0.1 - 90 AS centre_latitude,
                   ((capped.region % 100000 * 10 + j)::float8 + 0.5) * 0.1 - 180 AS centre_longitude
            FROM capped CROSS JOIN generate_series(-1, 10) AS i CROSS JOIN generate_series(-1, 10) AS j
        ), capped_cells AS (
            -- A cell can hold a point inside only if its centre is within the radius plus the
            -- farthest any of its points is from the centre: a corner on its side nearer the
            -- equator, where the cell is widest (a centimetre of slack for the rounding).
            SELECT * FROM candidate_cells
            WHERE bookworm_distance_km($8, $9, centre_latitude, centre_longitude)
                  <= $10 + 0.00001 + bookworm_distance_km(centre_latitude, centre_longitude,
                                                          centre_latitude - 0.05 * sign(centre_latitude), centre_longitude + 0.05)
        ), cell_hits AS (
            SELECT hit.*
            FROM capped_cells cc CROSS JOIN LATERAL (
                SELECT po.id, po.created_at, \(PostsStore.distance) AS distance
                FROM posts po
                WHERE po.cell = cc.cell AND (po.created_at, po.id) < (cc.created_at, cc.id)
                  AND bookworm_grid_cell(po.public_latitude, po.public_longitude, 1.0) = cc.region
                  AND CASE WHEN \(PostsStore.band) THEN \(PostsStore.distance) END <= $10
                  AND \(PostsStore.filters(shape, since: PostsStore.sinceHorizon).joined(separator: "\n          AND "))
                ORDER BY po.created_at DESC, po.id DESC
                LIMIT $6
            ) hit
        ), page AS (
            SELECT * FROM inner_hits
            UNION ALL SELECT id, created_at, distance FROM edge_scan WHERE NOT capped
            UNION ALL SELECT * FROM cell_hits
            ORDER BY created_at DESC, id DESC
            LIMIT $6
        )
        \(PostsStore.pageDetails)
        """
    }

    /// Each region's posts newest first, through at most `scanCap` of them: those inside the
    /// radius up to a page, and the `scanCap`-th post, marked `capped`, when the region got that
    /// far without a page (it is not inside, or it would count as one). Read from the region
    /// index alone (migration 0020).
    private static func regionScan(_ shape: FeedGridShape, regions: String, since: String?) -> String {
        """
        SELECT area.region, hit.*
            FROM unnest(\(regions)::int8[]) AS area(region) CROSS JOIN LATERAL (
                SELECT scan.id, scan.created_at, scan.distance,
                       scan.n = \(scanCap) AND NOT coalesce(scan.distance <= $10, false) AS capped
                FROM (
                    SELECT po.id, po.created_at,
                           CASE WHEN \(PostsStore.band) THEN \(PostsStore.distance) END AS distance,
                           row_number() OVER (ORDER BY po.created_at DESC, po.id DESC) AS n
                    FROM posts po
                    WHERE po.region = area.region
                      AND \(PostsStore.filters(shape, since: since).joined(separator: "\n                  AND "))
                    ORDER BY po.created_at DESC, po.id DESC
                    LIMIT \(scanCap)
                ) scan
                WHERE scan.distance <= $10 OR scan.n = \(scanCap)
                LIMIT $6
            ) hit
        """
    }
}
