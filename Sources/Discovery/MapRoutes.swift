import BookwormCore
import Foundation
import HTTPTypes
import Hummingbird

/// `GET /v1/map/pins?bbox=&zoom=`: single pins while a few hundred fit, clusters past that;
/// the answer never exceeds `maxMarkers` whatever the box.
package struct MapRoutes: Sendable {
    package let map: MapStore

    package init(map: MapStore) {
        self.map = map
    }
    static let maxSinglePins = 300
    static let maxMarkers = 1000

    package func addRoutes(authenticated: RouterGroup<AppRequestContext>) {
        authenticated.get("map/pins", use: pins)
    }

    @Sendable func pins(_ request: Request, context: AppRequestContext) async throws -> Response {
        let viewer = try context.requireSession().user.id
        guard let raw = try request.queryText("bbox", maxLength: 120) else { throw AppError.invalid("bbox", "is required") }
        let box = try MapBox(parsing: raw)
        let zoom = try request.queryText("zoom", maxLength: 4).map { text -> Int in
            guard let value = Int(text), (0...22).contains(value) else { throw AppError.invalid("zoom", "must be a whole number from 0 to 22") }
            return value
        } ?? 10
        // A map tile is 256 px; a cluster cell of ~32 px at this zoom, but never so small that
        // the box would hold more cells than we answer with. Clusters come first: they are read
        // from counts, and when they add up to few pins, those are listed singly.
        let zoomCell = 360 / (pow(2, Double(zoom)) * 8)
        let boundCell = sqrt(box.widthDegrees * box.heightDegrees / Double(Self.maxMarkers))
        let clusters = try await map.clusters(in: box, viewer: viewer, cellDegrees: max(zoomCell, boundCell, 1e-6), limit: Self.maxMarkers)
        // The clusters' total is never below the pins in the box; the single pins are counted
        // again all the same, since pins may have come between the two reads.
        if clusters.count < Self.maxMarkers, clusters.reduce(0, { $0 + $1.count }) <= Self.maxSinglePins {
            let singles = try await map.pins(in: box, viewer: viewer, limit: Self.maxSinglePins + 1)
            if singles.count <= Self.maxSinglePins { return try .json(["data": singles], for: request) }
        }
        return try .json(["data": clusters], for: request)
    }
}
