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
        WHERE \(inBoxes(latitude: "public_latitude", longitude: "public_longitude"))
          AND \(BlocksStore.noBlockBetween("$1", "pins.owner_id"))
          AND \(Visibility.ownerActive("pins.owner_id"))
        """

    /// SQL: the point lies in the box (parameters $2–$9).
    static func inBoxes(latitude: String, longitude: String) -> String {
        """
        (point(\(longitude), \(latitude)) <@ box(point($2, $3), point($4, $5))
         OR point(\(longitude), \(latitude)) <@ box(point($6, $7), point($8, $9)))
        """
    }

    /// $1–$9: the viewer and the box, each side moved out by `margin` degrees.
    package static func values(_ box: MapBox, viewer: UUID, margin: Double = 0) -> [SQLValue] {
        let (first, second) = (box.boxes[0], box.boxes.count > 1 ? box.boxes[1] : box.boxes[0])
        return [.uuid(viewer)] + [first, second].flatMap { side in
            [side.west - margin, side.south - margin, side.east + margin, side.north + margin].map { .double($0) }
        }
    }

    /// The side of a spot (`bookworm_map_spot`, 0.01 degree): a spot that reaches into the box
    /// has its mean point within this of it.
    static let spotDegrees = 0.01

    /// Up to `limit` single pins in the box, by latitude then longitude. The `LIMIT` inside stops
    /// the index scan there, so a dense box costs no more than a sparse one; the caller learns
    /// there are more from the count.
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
    /// straddles the antimeridian; each cluster sits at its pins' mean public point. It reads
    /// spots (`pin_spots`, migration 0022: the pins of a ~1 km square, counted and summed) whose
    /// mean point is within a spot's side of the box, less the pins of whoever the viewer is
    /// blocked with, so the cost follows the box's area and the viewer's blocks, not how many
    /// people pinned the city. Every spot that reaches into the box is read, so the clusters
    /// never count fewer pins than the box holds (a few just outside may join). A spot joins a
    /// cluster whole: clusters are never finer than a spot.
    func clusters(in box: MapBox, viewer: UUID, cellDegrees: Double, limit: Int) async throws -> [MapMarker] {
        let statement = SQLStatement(sql: """
            WITH hidden AS (
                SELECT bookworm_map_spot(p.public_latitude, p.public_longitude) AS spot, count(*)::int AS pins,
                       sum(p.public_latitude) AS latitude_sum, sum(p.public_longitude) AS longitude_sum
                FROM (SELECT blocked_id AS other FROM blocks WHERE blocker_id = $1
                      UNION SELECT blocker_id FROM blocks WHERE blocked_id = $1) AS b
                JOIN pins p ON p.owner_id = b.other
                WHERE \(Visibility.ownerActive("p.owner_id"))
                GROUP BY 1
            ), shown AS (
                SELECT ps.pins - coalesce(h.pins, 0) AS pins,
                       ps.latitude_sum - coalesce(h.latitude_sum, 0) AS latitude_sum,
                       ps.longitude_sum - coalesce(h.longitude_sum, 0) AS longitude_sum,
                       ps.latitude_sum / ps.pins AS latitude, ps.longitude_sum / ps.pins AS longitude
                FROM pin_spots ps LEFT JOIN hidden h ON h.spot = ps.spot
                WHERE ps.pins > 0 AND \(Self.inBoxes(latitude: "ps.latitude_sum / ps.pins", longitude: "ps.longitude_sum / ps.pins"))
            )
            SELECT sum(latitude_sum) / sum(pins), sum(longitude_sum) / sum(pins), sum(pins)::int8 FROM shown
            WHERE pins > 0
            GROUP BY floor((latitude + 90) / $10), floor((longitude + 180) / $10)
            ORDER BY 3 DESC, 1, 2
            LIMIT $11
            """, values: Self.values(box, viewer: viewer, margin: Self.spotDegrees) + [.double(cellDegrees), .int(limit)])
        var markers: [MapMarker] = []
        for try await (lat, lon, count) in try await client.query(statement.query, logger: logger).decode((Double, Double, Int).self) {
            markers.append(MapMarker(latitude: lat, longitude: lon, count: count))
        }
        return markers
    }
}
