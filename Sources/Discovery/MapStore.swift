import Accounts
import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// SQL for map markers, from public points only. Pins of anyone the viewer blocked, or who
/// blocked the viewer, are left out, as they are from nearby results.
package struct MapStore: Sendable {
    package let client: Database
    package let logger: Logger

    package init(client: Database, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Pins in the box (two boxes across the antimeridian) that `$1` may see. Parameters $1–$9.
    static let visiblePins = """
        FROM pins
        WHERE \(inBoxes("pins"))
          AND \(BlocksStore.noBlockBetween("$1", "pins.owner_id"))
          AND \(Visibility.ownerActive("pins.owner_id"))
        """

    /// SQL: the public point of `table` lies in the box (parameters $2–$9).
    static func inBoxes(_ table: String) -> String {
        """
        (point(\(table).public_longitude, \(table).public_latitude) <@ box(point($2, $3), point($4, $5))
         OR point(\(table).public_longitude, \(table).public_latitude) <@ box(point($6, $7), point($8, $9)))
        """
    }

    package static func values(_ box: MapBox, viewer: UUID) -> [SQLValue] {
        let (first, second) = (box.boxes[0], box.boxes.count > 1 ? box.boxes[1] : box.boxes[0])
        return [.uuid(viewer)] + [first, second].flatMap { [.double($0.west), .double($0.south), .double($0.east), .double($0.north)] }
    }

    /// Up to `limit` single pins in the box, nearest the south-west corner first. The inner
    /// `LIMIT` stops the index scan there, so a dense box costs no more than a sparse one.
    package func pins(in box: MapBox, viewer: UUID, limit: Int) async throws -> [MapMarker] {
        let statement = SQLStatement(sql: """
            SELECT lat, lon FROM (
                SELECT public_latitude AS lat, public_longitude AS lon \(Self.visiblePins) LIMIT $10) AS few
            ORDER BY lat, lon
            """, values: Self.values(box, viewer: viewer) + [.int(limit)])
        var markers: [MapMarker] = []
        for try await (lat, lon) in try await client.query(statement.query, logger: logger).decode((Double, Double).self) {
            markers.append(MapMarker(latitude: lat, longitude: lon, count: 1))
        }
        return markers
    }

    /// Pins grouped into square cells of `cellDegrees` aligned at (-90, -180), so no cell
    /// straddles the antimeridian; each cluster sits at its pins' mean public point. It reads the
    /// box's public points with their counts (`pin_points`, at most one per ~1 km grid cell),
    /// less the pins of whoever the viewer is blocked with: the cost follows the box's area and
    /// the viewer's blocks, not how many people pinned the city.
    func clusters(in box: MapBox, viewer: UUID, cellDegrees: Double, limit: Int) async throws -> [MapMarker] {
        let statement = SQLStatement(sql: """
            WITH hidden AS (
                SELECT p.public_latitude, p.public_longitude, count(*)::int AS n
                FROM (SELECT blocked_id AS other FROM blocks WHERE blocker_id = $1
                      UNION SELECT blocker_id FROM blocks WHERE blocked_id = $1) AS b
                JOIN pins p ON p.owner_id = b.other
                WHERE \(Self.inBoxes("p"))
                  AND \(Visibility.ownerActive("p.owner_id"))
                GROUP BY 1, 2
            ), shown AS (
                SELECT pp.public_latitude AS lat, pp.public_longitude AS lon, pp.pins - coalesce(h.n, 0) AS n
                FROM pin_points pp LEFT JOIN hidden h USING (public_latitude, public_longitude)
                WHERE \(Self.inBoxes("pp")) AND pp.pins > 0
            )
            SELECT sum(lat * n) / sum(n), sum(lon * n) / sum(n), sum(n)::int8 FROM shown
            WHERE n > 0
            GROUP BY floor((lat + 90) / $10), floor((lon + 180) / $10)
            ORDER BY 3 DESC, 1, 2
            LIMIT $11
            """, values: Self.values(box, viewer: viewer) + [.double(cellDegrees), .int(limit)])
        var markers: [MapMarker] = []
        for try await (lat, lon, count) in try await client.query(statement.query, logger: logger).decode((Double, Double, Int).self) {
            markers.append(MapMarker(latitude: lat, longitude: lon, count: count))
        }
        return markers
    }
}
