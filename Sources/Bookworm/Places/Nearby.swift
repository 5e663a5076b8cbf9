import Foundation

/// A nearby search: where, how far, and what for.
struct NearbyQuery: Sendable {
    let origin: GeoPoint
    let radiusKm: Double
    let words: [String]?
    let isbn13: String?
    /// The caller: their own copies are left out.
    let callerID: UUID

    static let defaultRadiusKm = 10.0
    static let maxRadiusKm = 500.0
}

/// Keyset position in a nearest-first list: the exact distance (as its bit pattern, so it
/// survives the round trip) and the row id that breaks ties.
struct DistanceCursor: Equatable, Sendable {
    let distance: Double
    let id: UUID

    /// The same opaque form as time cursors; a non-negative double's bit pattern fits an Int64.
    var encoded: String { Cursor(micros: Int64(bitPattern: distance.bitPattern), id: id).encoded }

    init(distance: Double, id: UUID) {
        self.distance = distance
        self.id = id
    }

    init(encoded text: String) throws {
        let cursor = try Cursor(encoded: text)
        let distance = Double(bitPattern: UInt64(bitPattern: cursor.micros))
        guard distance.isFinite, distance >= 0 else { throw AppError.invalid("cursor", "is malformed") }
        self.init(distance: distance, id: cursor.id)
    }
}

/// Where a copy is, as anyone but its owner may see it: the pin's public point only.
struct PublicPlace: Encodable, Sendable {
    let latitude: Double
    let longitude: Double
}

struct NearbyCopy: Encodable, Sendable {
    let copy: CopyView
    let distanceKm: Double
    /// The keyset position: the chord to the origin on the unit sphere, which orders exactly
    /// like `distanceKm` and is what the index scan walks. Not part of the JSON.
    let sortKey: Double
    let place: PublicPlace

    enum CodingKeys: String, CodingKey {
        case distanceKm = "distance_km", pin
    }

    func encode(to encoder: any Encoder) throws {
        try copy.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Nearby.rounded(distanceKm), forKey: .distanceKm)
        try container.encode(place, forKey: .pin)
    }
}

struct NearbyOwner: Encodable, Sendable {
    let user: OwnerSummary
    let distanceKm: Double
    let matchingCopies: Int

    enum CodingKeys: String, CodingKey {
        case user
        case distanceKm = "distance_km", matchingCopies = "matching_copies"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(user, forKey: .user)
        try container.encode(Nearby.rounded(distanceKm), forKey: .distanceKm)
        try container.encode(matchingCopies, forKey: .matchingCopies)
    }
}

enum Nearby {
    /// Shown to 0.1 km: finer would say more than the public point does.
    static func rounded(_ km: Double) -> Double { (km * 10).rounded() / 10 }
}
