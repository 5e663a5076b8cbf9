import BookwormCore
import Foundation
import Places

/// A map's visible area: `min_lon,min_lat,max_lon,max_lat`; `min_lon > max_lon` crosses the
/// antimeridian.
package struct MapBox: Sendable {
    let boxes: [GeoBox]
    let widthDegrees: Double
    let heightDegrees: Double

    init(parsing raw: String) throws {
        let parts = raw.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.count == 4, let minLon = parts[0], let minLat = parts[1], let maxLon = parts[2], let maxLat = parts[3],
              [minLon, minLat, maxLon, maxLat].allSatisfy(\.isFinite),
              (-180...180).contains(minLon), (-180...180).contains(maxLon),
              (-90...90).contains(minLat), (-90...90).contains(maxLat), minLat <= maxLat else {
            throw AppError.invalid("bbox", "must be min_lon,min_lat,max_lon,max_lat in degrees (min_lon > max_lon crosses the antimeridian)")
        }
        heightDegrees = maxLat - minLat
        if minLon <= maxLon {
            boxes = [GeoBox(south: minLat, west: minLon, north: maxLat, east: maxLon)]
            widthDegrees = maxLon - minLon
        } else {
            boxes = [GeoBox(south: minLat, west: minLon, north: maxLat, east: 180),
                     GeoBox(south: minLat, west: -180, north: maxLat, east: maxLon)]
            widthDegrees = 360 - minLon + maxLon
        }
    }
}

/// One marker: a single pin's public point (`count` 1) or a cluster of them.
package struct MapMarker: Encodable, Sendable {
    let latitude: Double
    let longitude: Double
    let count: Int
}

