import BookwormCore
import Catalog
import Foundation
import HTTPTypes
import Hummingbird
import Places

/// `/v1/nearby/copies` and `/v1/nearby/owners` (API.md, Places): nearest first by distance
/// to public points, keyset cursors over (distance, id).
package struct NearbyRoutes: Sendable {
    package let nearby: NearbyStore

    package init(nearby: NearbyStore) {
        self.nearby = nearby
    }

    package func addRoutes(authenticated: RouterGroup<AppRequestContext>) {
        authenticated.get("nearby/copies", use: copies)
        authenticated.get("nearby/owners", use: owners)
    }

    @Sendable func copies(_ request: Request, context: AppRequestContext) async throws -> Response {
        let (query, limit, after) = try Self.parse(request, caller: context.requireSession().user.id)
        var rows = try await nearby.copies(query, after: after, limit: limit + 1)
        // Trimmed in place: a copy of the page (`Array(rows.prefix(limit))`) retains and
        // releases every row's cells once more.
        let next = Self.trim(&rows, to: limit).map { DistanceCursor(distance: $0.sortKey, id: $0.copy.id).encoded }
        return try .json(Page(data: rows, nextCursor: next), for: request)
    }

    @Sendable func owners(_ request: Request, context: AppRequestContext) async throws -> Response {
        let (query, limit, after) = try Self.parse(request, caller: context.requireSession().user.id)
        var rows = try await nearby.owners(query, after: after, limit: limit + 1)
        let next = Self.trim(&rows, to: limit).map { DistanceCursor(distance: $0.sortKey, id: $0.user.id).encoded }
        return try .json(Page(data: rows, nextCursor: next), for: request)
    }

    /// Drops the row fetched past the page; returns the page's last row when there was one,
    /// the row the next page's cursor starts after.
    static func trim<Row>(_ rows: inout [Row], to limit: Int) -> Row? {
        guard rows.count > limit else { return nil }
        rows.removeLast(rows.count - limit)
        return rows.last
    }

    package static func parse(_ request: Request, caller: UUID) throws -> (NearbyQuery, limit: Int, after: DistanceCursor?) {
        let (origin, radius) = try parseArea(request)
        let words = CatalogValidation.searchWords(try request.queryText("q"))
        let isbn = try request.queryText("isbn", maxLength: 20).map(CatalogValidation.isbnFilter)
        let page = try PageRequest.limit(request)
        let after = try request.queryText("cursor", maxLength: 128).map(DistanceCursor.init(encoded:))
        return (NearbyQuery(origin: origin, radiusKm: radius, words: words, isbn13: isbn, callerID: caller), page, after)
    }

    /// `latitude`, `longitude` (required) and `radius_km` (default 10, at most 500).
    static func parseArea(_ request: Request) throws -> (GeoPoint, radiusKm: Double) {
        var errors: [FieldError] = []
        let latitude = try collectFieldErrors(&errors) { try number(request, "latitude", default: nil) }
        let longitude = try collectFieldErrors(&errors) { try number(request, "longitude", default: nil) }
        let radius = try collectFieldErrors(&errors) { try number(request, "radius_km", default: NearbyQuery.defaultRadiusKm) }
        guard errors.isEmpty, let latitude, let longitude, let radius else { throw AppError.validation(errors) }
        let origin = try PlacesValidation.point(latitude: latitude, longitude: longitude)
        guard radius > 0, radius <= NearbyQuery.maxRadiusKm else {
            throw AppError.invalid("radius_km", "must be more than 0 and at most \(Int(NearbyQuery.maxRadiusKm))")
        }
        // At least a metre: a radius such as 1e-300 km would underflow PostgreSQL's float math.
        return (origin, max(radius, 0.001))
    }

    private static func number(_ request: Request, _ name: String, default fallback: Double?) throws -> Double {
        guard let raw = try request.queryText(name, maxLength: 32) else {
            guard let fallback else { throw AppError.invalid(name, "is required") }
            return fallback
        }
        guard let value = Double(raw), value.isFinite else { throw AppError.invalid(name, "must be a finite number") }
        return value
    }
}
