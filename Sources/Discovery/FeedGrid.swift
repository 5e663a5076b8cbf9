import Foundation
import Places

/// The grids the nearby feed reads posts by (migration 0017): each post carries the cell its
/// pin's public point falls in on each grid, indexed newest first per cell. A page reads the
/// cells covering its radius, so its cost follows the page, not how many posts the city has.
enum FeedGrid {
    struct Level: Equatable {
        /// The posts column holding this grid's cell.
        let column: String
        let stepDegrees: Double
        /// The most cells of this grid a page reads (counted over the bounding boxes); a wider
        /// circle goes to the next grid.
        let maxCells: Int
    }

    /// Finest first: 0.1 degree cells (about 11 km north to south) up to radii of 70 to 100 km
    /// (400 cells over the bounding box), 1 degree regions beyond, up to 400 of them (500 km,
    /// the widest radius, up to about 75 degrees of latitude). A region no more than clipped is
    /// read newest first back to a page inside the circle, and where it holds a dense city
    /// outside the circle that was most of the city: 20 km around Reading, beside London, took
    /// 7.9 ms at 1M posts and 45 to 60 km beside it 6 to 8 ms, against 1.6 to 1.8 ms by cells
    /// (whole requests); 60 to 80 km around London's centre went from 2.2 to 2.8 ms. (It had
    /// been 24 cells, so regions from about 15 km.) With regions up to 24, radii past about
    /// 200 km read every pin in the radius and their posts: 170 to 540 ms at 250 to 500 km
    /// around London, Paris or New York, against 2.3 ms by 150 regions. A region beside a dense
    /// city is read only so far (`RegionFeedSQL`).
    static let levels = [Level(column: "cell", stepDegrees: 0.1, maxCells: 400), Level(column: "region", stepDegrees: 1.0, maxCells: 400)]

    /// The cell of `latitude`/`longitude` on a grid of `step` degrees: the very floating-point
    /// operations of SQL's `bookworm_grid_cell`, so both sides name the same cell.
    static func cell(latitude: Double, longitude: Double, step: Double) -> Int64 {
        index(latitude + 90, step) * 100_000 + index(longitude + 180, step)
    }

    /// Row (of `latitude + 90`) or column (of `longitude + 180`) on a grid of `step` degrees.
    static func index(_ degrees: Double, _ step: Double) -> Int64 { Int64((degrees / step).rounded(.down)) }

    /// The cells a page reads: `inner` ones, mostly inside the circle, and `edge` ones it only
    /// clips. An edge cell may hold thousands of posts and few inside, so a page reads it only
    /// back to the time the inner cells' page reaches (`PostsStore.gridSQL`).
    struct Covering {
        let level: Level
        let inner: [Int64]
        let edge: [Int64]
    }

    /// The finest grid whose cells covering the area's bounding boxes number at most the
    /// level's `maxCells`, with those cells; nil when even the coarsest needs more (a very wide
    /// radius, or near a pole where the box spans every longitude).
    static func covering(_ area: NearbyArea) -> Covering? {
        levels.lazy.compactMap { covering(area, level: $0) }.first
    }

    /// The cells of `level` the circle reaches, nil when its bounding boxes span more than the level's `maxCells`.
    static func covering(_ area: NearbyArea, level: Level) -> Covering? {
        var cells = Set<Int64>(), inner = Set<Int64>()
        let step = level.stepDegrees
        for box in Geo.boundingBoxes(around: area.origin, radiusKm: area.radiusKm) {
            let rows = index(box.south + 90, step)...index(box.north + 90, step)
            let columns = index(box.west + 180, step)...index(box.east + 180, step)
            guard cells.count + rows.count * columns.count <= level.maxCells else { return nil }
            for row in rows {
                for column in columns where reaches(row: row, column: column, step: step, area: area) {
                    cells.insert(row * 100_000 + column)
                    if isMostlyInside(row: row, column: column, step: step, area: area) { inner.insert(row * 100_000 + column) }
                }
            }
        }
        return Covering(level: level, inner: inner.sorted(), edge: cells.subtracting(inner).sorted())
    }

    /// Whether the circle reaches the cell: the exact distance to the cell's nearest point is
    /// within the radius. A cell in the bounding box's corner may hold thousands of posts and
    /// none inside; reading it would cost more than all the others.
    static func reaches(row: Int64, column: Int64, step: Double, area: NearbyArea) -> Bool {
        let south = Double(row) * step - 90, north = south + step
        let west = Double(column) * step - 180, east = west + step
        let origin = area.origin
        let toWest = wrapped(west - origin.longitude), toEast = wrapped(east - origin.longitude)
        let spansOrigin = toWest <= 0 && toEast >= 0
        if spansOrigin && (south...north).contains(origin.latitude) { return true }
        // Along a parallel, distance grows with the longitude difference: the south and north
        // edges are nearest at the origin's longitude, or at the nearer corner.
        let edgeLongitude = spansOrigin ? origin.longitude : (abs(toWest) < abs(toEast) ? west : east)
        var nearest = min(Geo.distanceKm(origin, GeoPoint(latitude: south, longitude: edgeLongitude)),
                          Geo.distanceKm(origin, GeoPoint(latitude: north, longitude: edgeLongitude)))
        // Along a meridian, distance falls to the foot of the perpendicular and rises after it.
        for (longitude, difference) in [(west, toWest), (east, toEast)] {
            guard abs(difference) < 90 else { return true }
            let foot = atan(tan(origin.latitude * .pi / 180) / cos(difference * .pi / 180)) * 180 / .pi
            let latitude = min(max(foot, south), north)
            nearest = min(nearest, Geo.distanceKm(origin, GeoPoint(latitude: latitude, longitude: longitude)))
        }
        // A millimetre of slack for the cell edges' rounding.
        return nearest <= area.radiusKm + 1e-6
    }

    /// Whether at least two of nine points spread over the cell (the centres of its thirds) are
    /// inside the circle: about a fifth of the cell or more.
    static func isMostlyInside(row: Int64, column: Int64, step: Double, area: NearbyArea) -> Bool {
        var inside = 0
        for i in 0..<3 {
            for j in 0..<3 {
                let point = GeoPoint(latitude: (Double(row) + (Double(i) + 0.5) / 3) * step - 90,
                                     longitude: (Double(column) + (Double(j) + 0.5) / 3) * step - 180)
                if Geo.distanceKm(area.origin, point) <= area.radiusKm { inside += 1 }
                if inside >= 2 { return true }
            }
        }
        return false
    }

    /// A longitude difference in (-180, 180].
    private static func wrapped(_ degrees: Double) -> Double {
        let value = degrees.truncatingRemainder(dividingBy: 360)
        return value > 180 ? value - 360 : (value <= -180 ? value + 360 : value)
    }
}
