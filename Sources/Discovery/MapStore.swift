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
        WHERE (point(public_longitude, public_latitude) <@ box(point($2, $3), point($4, $5))
               OR point(public_longitude, public_latitude) <@ box(point($6, $7), point($8, $9)))
          AND \(BlocksStore.noBlockBetween("$1", "pins.owner_id"))
          AND \(Visibility.ownerActive("pins.owner_id"))
        """

    package static func values(_ box: MapBox, viewer: UUID) -> [SQLValue] {
        let (first, second) = (box.boxes[0], box.boxes.count > 1 ? box.boxes[1] : box.boxes[0])
        return [.uuid(viewer)] + [first, second].flatMap { [.double($0.west), .double($0.south), .double($0.east), .double($0.north)] }
    }

    /// Up to `limit` single pins in the box; the caller learns there are more from the count.
    package func pins(in box: MapBox, viewer: UUID, limit: Int) async throws -> [MapMarker] {
        let statement = SQLStatement(sql: """
            SELECT public_latitude, public_longitude \(Self.visiblePins)
            ORDER BY public_latitude, public_longitude
            LIMIT $10
            """, values: Self.values(box, viewer: viewer) + [.int(limit)])
        var markers: [MapMarker] = []
        for try await (lat, lon) in try await client.query(statement.query, logger: logger).decode((Double, Double).self) {
            markers.append(MapMarker(latitude: lat, longitude: lon, count: 1))
        }
        return markers
    }

    /// Pins grouped into square cells of `cellDegrees` aligned at (-90, -180), so no cell
    /// straddles the antimeridian; each cluster sits at its pins' mean public point.
    func clusters(in box: MapBox, viewer: UUID, cellDegrees: Double, limit: Int) async throws -> [MapMarker] {
        let statement = SQLStatement(sql: """
            SELECT avg(public_latitude), avg(public_longitude), count(*)::int8 \(Self.visiblePins)
            GROUP BY floor((public_latitude + 90) / $10), floor((public_longitude + 180) / $10)
            ORDER BY count(*) DESC, avg(public_latitude), avg(public_longitude)
            LIMIT $11
            """, values: Self.values(box, viewer: viewer) + [.double(cellDegrees), .int(limit)])
        var markers: [MapMarker] = []
        for try await (lat, lon, count) in try await client.query(statement.query, logger: logger).decode((Double, Double, Int).self) {
            markers.append(MapMarker(latitude: lat, longitude: lon, count: count))
        }
        return markers
    }
}
