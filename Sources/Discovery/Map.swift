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
        // The shape is the schema's pattern (four plain decimals, 400 otherwise); the ranges are a
        // rule the pattern cannot state (422).
        let texts = raw.split(separator: ",", omittingEmptySubsequences: false)
        let parts = texts.map { Self.isPlainDecimal($0) ? Double($0).map(PlacesValidation.snapped) : nil }
        guard parts.count == 4, let minLon = parts[0], let minLat = parts[1], let maxLon = parts[2], let maxLat = parts[3] else {
            throw AppError.invalid("bbox", "must be four decimal numbers: min_lon,min_lat,max_lon,max_lat")
        }
        guard (-180...180).contains(minLon), (-180...180).contains(maxLon),
              (-90...90).contains(minLat), (-90...90).contains(maxLat), minLat <= maxLat else {
            throw AppError.broken("bbox", "must be min_lon,min_lat,max_lon,max_lat in degrees (min_lon > max_lon crosses the antimeridian)")
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

extension MapBox {
    /// `-?[0-9]+(.[0-9]+)?`, as the OpenAPI pattern says.
    static func isPlainDecimal(_ text: Substring) -> Bool {
        let body = text.hasPrefix("-") ? text.dropFirst() : text
        let halves = body.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        return halves.allSatisfy { !$0.isEmpty && $0.allSatisfy { $0.isASCII && $0.isNumber } }
    }
}

/// One marker: a single pin's public point (`count` 1) or a cluster of them.
package struct MapMarker: Encodable, Sendable {
    let latitude: Double
    let longitude: Double
    let count: Int
}

