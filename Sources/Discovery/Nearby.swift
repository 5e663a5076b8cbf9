import BookwormCore
import Catalog
import Foundation
import Places

/// A nearby search: where, how far, and what for.
package struct NearbyQuery: Sendable {
    let origin: GeoPoint
    let radiusKm: Double
    package let words: [String]?
    package let isbn13: String?
    /// The caller: their own copies are left out.
    let callerID: UUID

    /// Whether the request narrows the copies by words or ISBN (a statement shape of its own).
    var isFiltered: Bool { words != nil || isbn13 != nil }

    package init(origin: GeoPoint, radiusKm: Double, words: [String]? = nil, isbn13: String? = nil, callerID: UUID) {
        self.origin = origin
        self.radiusKm = radiusKm
        self.words = words
        self.isbn13 = isbn13
        self.callerID = callerID
    }

    static let defaultRadiusKm = 10.0
    static let maxRadiusKm = 500.0
}

/// Keyset position in a nearest-first list: the exact distance (as its bit pattern, so it
/// survives the round trip) and the row id that breaks ties.
package struct DistanceCursor: Equatable, Sendable {
    let distance: Double
    let id: UUID

    /// The same opaque form as time cursors; a non-negative double's bit pattern fits an Int64.
    var encoded: String { Cursor(micros: Int64(bitPattern: distance.bitPattern), id: id).encoded }

    init(distance: Double, id: UUID) {
        self.distance = distance
        self.id = id
    }

    init(encoded text: String) throws {
        let cursor = try Cursor(encoded: text, raw: true)
        // Any 32 characters decode; bits that are no distance mean "past everything" (an empty page).
        let distance = Double(bitPattern: UInt64(bitPattern: cursor.micros)).magnitude
        self.init(distance: distance.isFinite ? distance : .greatestFiniteMagnitude, id: cursor.id)
    }
}

package struct NearbyCopy: Encodable, Sendable {
    package let copy: CopyView
    package let distanceKm: Double
    /// The keyset position: the chord to the origin on the unit sphere, which orders exactly
    /// like `distanceKm` and is what the index scan walks. Not part of the JSON.
    let sortKey: Double
    package let place: PublicPlace

    enum CodingKeys: String, CodingKey {
        case distanceKm = "distance_km", pin
    }

    package func encode(to encoder: any Encoder) throws {
        try copy.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Nearby.rounded(distanceKm), forKey: .distanceKm)
        try container.encode(place, forKey: .pin)
    }
}

package struct NearbyOwner: Encodable, Sendable {
    let user: OwnerSummary
    let distanceKm: Double
    let matchingCopies: Int
    /// The keyset position: the chord to the owner's nearest pin holding a match (as
    /// `NearbyCopy.sortKey`). Not part of the JSON.
    let sortKey: Double

    enum CodingKeys: String, CodingKey {
        case user
        case distanceKm = "distance_km", matchingCopies = "matching_copies"
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(user, forKey: .user)
        try container.encode(Nearby.rounded(distanceKm), forKey: .distanceKm)
        try container.encode(matchingCopies, forKey: .matchingCopies)
    }
}

package enum Nearby {
    /// Shown to 0.1 km: finer would say more than the public point does.
    package static func rounded(_ km: Double) -> Double { (km * 10).rounded() / 10 }
}

/// The prefilter of a radius search over everything in the radius: one or two latitude/longitude
/// boxes around the origin (two across the antimeridian, a full band over a pole) that the GiST
/// index on public points can answer. The exact haversine decides inclusion afterwards.
enum RadiusBoxes {
    /// SQL: pin `p`'s public point is in either box, whose corners are parameters
    /// `$first` … `$(first + 7)` in the order of `values`.
    static func filter(firstParameter first: Int) -> String {
        let n = (first..<first + 8).map { "$\($0)" }
        return """
            (point(p.public_longitude, p.public_latitude) <@ box(point(\(n[0]), \(n[1])), point(\(n[2]), \(n[3])))
                       OR point(p.public_longitude, p.public_latitude) <@ box(point(\(n[4]), \(n[5])), point(\(n[6]), \(n[7]))))
            """
    }

    /// The eight corner values (west, south, east, north of each box; one box is given twice).
    static func values(around origin: GeoPoint, radiusKm: Double) -> [SQLValue] {
        let boxes = Geo.boundingBoxes(around: origin, radiusKm: radiusKm)
        let first = boxes[0]
        let second = boxes.count > 1 ? boxes[1] : boxes[0]
        return [first, second].flatMap { [.double($0.west), .double($0.south), .double($0.east), .double($0.north)] }
    }
}

extension NearbyCopy: JSONWritable {
    package func write(to json: inout JSONWriter) {
        copy.write(to: &json, nearby: (Nearby.rounded(distanceKm), place))
    }
}
