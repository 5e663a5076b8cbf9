import Accounts
import BookwormCore
import Foundation

package enum PinKind: String, CaseIterable, Sendable {
    case home, meetup

    /// What others may see of a point of this kind.
    package func publicPoint(for exact: GeoPoint) -> GeoPoint {
        switch self {
        case .home: Geo.cellCentre(of: exact)
        case .meetup: exact
        }
    }
}

/// A pin as its owner sees it: the exact point and the public one. Never shown to anyone else.
package struct OwnedPin: Encodable, Sendable {
    let id: UUID
    let label: String
    let kind: String
    let exact: GeoPoint
    let publicPoint: GeoPoint
    let isDefault: Bool
    let createdAt: Date
    let updatedAt: Date

    enum CodingKeys: String, CodingKey {
        case id, label, kind, latitude, longitude
        case publicLatitude = "public_latitude", publicLongitude = "public_longitude"
        case isDefault = "is_default", createdAt = "created_at", updatedAt = "updated_at"
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.apiString, forKey: .id)
        try container.encode(label, forKey: .label)
        try container.encode(kind, forKey: .kind)
        try container.encode(exact.latitude, forKey: .latitude)
        try container.encode(exact.longitude, forKey: .longitude)
        try container.encode(publicPoint.latitude, forKey: .publicLatitude)
        try container.encode(publicPoint.longitude, forKey: .publicLongitude)
        try container.encode(isDefault, forKey: .isDefault)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(updatedAt, forKey: .updatedAt)
    }
}

struct CreatePinBody: StrictBody {
    /// Made by the client (`ClientMadeID`), or nil for the server to choose.
    let id: UUID?
    let label: String
    let latitude: Double
    let longitude: Double
    let kind: String
    let isDefault: Bool?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case id, label, latitude, longitude, kind
        case isDefault = "is_default"
    }
}

/// `PATCH /v1/me/pins/{id}`: a pin always has a label, a point and a kind, and is the default
/// or not, so no field takes null (400 naming it); a field left out stays as it was.
struct UpdatePinBody: PatchBody {
    let label: String?
    let latitude: Double?
    let longitude: Double?
    let kind: String?
    let isDefault: Bool?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case label, latitude, longitude, kind
        case isDefault = "is_default"
    }

    static let nullableKeys: [CodingKeys] = []
}

package enum PlacesValidation {
    static let maxPinsPerUser = 20

    package static func label(_ raw: String) throws -> String {
        guard let value = try AccountValidation.text(raw, field: "label", maxLength: 80, allowNewlines: false) else {
            throw AppError.invalid("label", "is required: 1 to 80 characters")
        }
        return value
    }

    package static func kind(_ raw: String) throws -> PinKind {
        guard let kind = PinKind(rawValue: raw) else { throw AppError.invalid("kind", "must be home or meetup") }
        return kind
    }

    /// Finite and in range; JSON cannot carry NaN or infinity, but a query string can.
    package static func point(latitude: Double, longitude: Double) throws -> GeoPoint {
        var errors: [FieldError] = []
        if !latitude.isFinite || !(-90...90).contains(latitude) { errors.append(FieldError("latitude", "must be a number from -90 to 90")) }
        if !longitude.isFinite || !(-180...180).contains(longitude) { errors.append(FieldError("longitude", "must be a number from -180 to 180")) }
        guard errors.isEmpty else { throw AppError.validation(errors) }
        return GeoPoint(latitude: snapped(latitude), longitude: snapped(longitude))
    }

    /// To a billionth of a degree (about 0.1 mm): nothing real is lost, and a coordinate such
    /// as 1e-300 becomes 0 before PostgreSQL's float arithmetic can underflow on it (an error).
    package static func snapped(_ degrees: Double) -> Double {
        (degrees * 1e9).rounded() / 1e9
    }
}

/// Where a copy is, as anyone but its owner may see it: the pin's public point only.
package struct PublicPlace: Encodable, Sendable {
    package let latitude: Double
    package let longitude: Double

    package init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }
}
