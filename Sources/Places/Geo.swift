import Foundation

/// A point in decimal degrees.
package struct GeoPoint: Equatable, Sendable {
    package let latitude: Double
    package let longitude: Double

    package init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }
}

/// Great-circle geometry on a sphere of the mean Earth radius (DESIGN.md, Places and privacy).
package enum Geo {
    package static let earthRadiusKm = 6371.0088
    /// About 1 km of latitude: the side of a privacy grid cell.
    static let cellDegrees = 1.0 / (earthRadiusKm * Double.pi / 180)

    /// Haversine distance in km; exact across the antimeridian and at the poles.
    package static func distanceKm(_ a: GeoPoint, _ b: GeoPoint) -> Double {
        let lat1 = a.latitude * .pi / 180
        let lat2 = b.latitude * .pi / 180
        let dLat = lat2 - lat1
        let dLon = (b.longitude - a.longitude) * .pi / 180
        let h = sin(dLat / 2) * sin(dLat / 2) + cos(lat1) * cos(lat2) * sin(dLon / 2) * sin(dLon / 2)
        return 2 * earthRadiusKm * asin(min(1, sqrt(h)))
    }

    /// The centre of the ~1 km grid cell holding `point`. Rows are `cellDegrees` of latitude;
    /// each row is cut into as many equal columns as make them ~1 km wide at its middle, so
    /// cells stay about square from the equator to the poles. Every point of a cell maps to the
    /// same centre: that is what hides a home inside it.
    static func cellCentre(of point: GeoPoint) -> GeoPoint {
        let rows = Int((180 / cellDegrees).rounded(.up))
        let row = min(rows - 1, max(0, Int(((point.latitude + 90) / cellDegrees).rounded(.down))))
        let rowSouth = -90 + Double(row) * cellDegrees
        let rowNorth = min(90, rowSouth + cellDegrees)
        let middle = (rowSouth + rowNorth) / 2
        let columns = max(1, Int((360 * cos(middle * .pi / 180) / cellDegrees).rounded(.down)))
        let width = 360 / Double(columns)
        var offset = (point.longitude + 180).truncatingRemainder(dividingBy: 360)
        if offset < 0 { offset += 360 }
        let column = min(columns - 1, Int((offset / width).rounded(.down)))
        return GeoPoint(latitude: middle, longitude: -180 + (Double(column) + 0.5) * width)
    }

    /// Latitude/longitude boxes that contain every point within `radiusKm` of `centre` (two
    /// boxes when the circle crosses the antimeridian, a full-longitude band when it holds a
    /// pole). Only a prefilter: the exact distance decides.
    package static func boundingBoxes(around centre: GeoPoint, radiusKm: Double) -> [GeoBox] {
        // A hair wider than exact, so rounding never drops a point on the edge.
        let margin = 1e-9
        let angular = radiusKm / earthRadiusKm
        let dLat = angular * 180 / .pi + margin
        let south = centre.latitude - dLat
        let north = centre.latitude + dLat
        if south <= -90 || north >= 90 {
            return [GeoBox(south: max(-90, south), west: -180, north: min(90, north), east: 180)]
        }
        let dLon = asin(min(1, sin(angular) / cos(centre.latitude * .pi / 180))) * 180 / .pi + margin
        let west = centre.longitude - dLon
        let east = centre.longitude + dLon
        if dLon >= 180 { return [GeoBox(south: south, west: -180, north: north, east: 180)] }
        if west < -180 {
            return [GeoBox(south: south, west: west + 360, north: north, east: 180),
                    GeoBox(south: south, west: -180, north: north, east: east)]
        }
        if east > 180 {
            return [GeoBox(south: south, west: west, north: north, east: 180),
                    GeoBox(south: south, west: -180, north: north, east: east - 360)]
        }
        return [GeoBox(south: south, west: west, north: north, east: east)]
    }
}

package struct GeoBox: Equatable, Sendable {
    package let south: Double
    package let west: Double
    package let north: Double
    package let east: Double

    package init(south: Double, west: Double, north: Double, east: Double) {
        self.south = south
        self.west = west
        self.north = north
        self.east = east
    }

    package func contains(_ point: GeoPoint) -> Bool {
        point.latitude >= south && point.latitude <= north && point.longitude >= west && point.longitude <= east
    }
}
