import Foundation
import Logging
import PostgresNIO

/// SQL for map markers, from public points only.
struct MapStore: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// Up to `limit` single pins in the boxes; the caller learns there are more from the count.
    func pins(in box: MapBox, limit: Int) async throws -> [MapMarker] {
        let (first, second) = (box.boxes[0], box.boxes.count > 1 ? box.boxes[1] : box.boxes[0])
        let rows = try await client.query("""
            SELECT public_latitude, public_longitude FROM pins
            WHERE point(public_longitude, public_latitude) <@ box(point(\(first.west), \(first.south)), point(\(first.east), \(first.north)))
               OR point(public_longitude, public_latitude) <@ box(point(\(second.west), \(second.south)), point(\(second.east), \(second.north)))
            ORDER BY public_latitude, public_longitude
            LIMIT \(limit)
            """, logger: logger)
        var markers: [MapMarker] = []
        for try await (lat, lon) in rows.decode((Double, Double).self) { markers.append(MapMarker(latitude: lat, longitude: lon, count: 1)) }
        return markers
    }

    /// Pins grouped into square cells of `cellDegrees` aligned at (-90, -180), so no cell
    /// straddles the antimeridian; each cluster sits at its pins' mean public point.
    func clusters(in box: MapBox, cellDegrees: Double, limit: Int) async throws -> [MapMarker] {
        let (first, second) = (box.boxes[0], box.boxes.count > 1 ? box.boxes[1] : box.boxes[0])
        let rows = try await client.query("""
            SELECT avg(public_latitude), avg(public_longitude), count(*)::int8 FROM pins
            WHERE point(public_longitude, public_latitude) <@ box(point(\(first.west), \(first.south)), point(\(first.east), \(first.north)))
               OR point(public_longitude, public_latitude) <@ box(point(\(second.west), \(second.south)), point(\(second.east), \(second.north)))
            GROUP BY floor((public_latitude + 90) / \(cellDegrees)), floor((public_longitude + 180) / \(cellDegrees))
            ORDER BY count(*) DESC, avg(public_latitude), avg(public_longitude)
            LIMIT \(limit)
            """, logger: logger)
        var markers: [MapMarker] = []
        for try await (lat, lon, count) in rows.decode((Double, Double, Int).self) {
            markers.append(MapMarker(latitude: lat, longitude: lon, count: count))
        }
        return markers
    }
}

