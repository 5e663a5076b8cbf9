import Accounts
import BookwormCore
import Catalog
import Foundation

/// `POST /v1/me/wishes`: one of `book_id` or `isbn`, then where and how. The book's keys may be
/// left out but not sent as null; the other fields' null means their default.
package struct NewWishBody: StrictBody {
    let id: UUID?
    let bookId: FieldUpdate<String>
    let isbn: FieldUpdate<String>
    let anyEdition: Bool?
    let radiusKm: Double?
    let pinId: String?
    let minCondition: String?

    package enum CodingKeys: String, CodingKey, CaseIterable {
        case id, isbn
        case bookId = "book_id", anyEdition = "any_edition", radiusKm = "radius_km", pinId = "pin_id", minCondition = "min_condition"
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decodeIfPresent(UUID.self, forKey: .id)
        bookId = try FieldUpdate(container, .bookId)
        isbn = try FieldUpdate(container, .isbn)
        anyEdition = try container.decodeIfPresent(Bool.self, forKey: .anyEdition)
        radiusKm = try container.decodeIfPresent(Double.self, forKey: .radiusKm)
        pinId = try container.decodeIfPresent(String.self, forKey: .pinId)
        minCondition = try container.decodeIfPresent(String.self, forKey: .minCondition)
    }
}

/// Which book a wish names, before it is looked up.
enum WishedBook: Sendable {
    case id(UUID)
    case isbn13(String)
}

/// A validated wish.
struct NewWish: Sendable {
    /// Made by the client (`ClientMadeID`), or nil for the server to choose.
    var id: UUID? = nil
    let book: WishedBook
    let anyEdition: Bool
    let radiusKm: Double
    let pinID: UUID?
    let minCondition: CopyCondition?
}

/// The limits on wishes and alerts (API.md, Shelf).
package struct WishPolicy: Sendable {
    package var maxWishesPerUser: Int
    package var defaultRadiusKm: Double
    package var maxRadiusKm: Double
    /// The hour (UTC) daily digests go out at.
    package var digestHour: Int
    /// Wishes examined per fan-out transaction: a popular book's alerts are written in batches,
    /// so no transaction holds locks for long.
    package var fanOutBatch: Int
    /// A new wish is alerted to at most this many copies already on offer, the nearest: in a
    /// city a popular book may be on offer a hundred times, and a mail listing them all helps
    /// nobody (nearby search with the ISBN shows the rest).
    package var alertsPerNewWish: Int

    package init(maxWishesPerUser: Int = 200, defaultRadiusKm: Double = 25, maxRadiusKm: Double = 500,
                 digestHour: Int = 8, fanOutBatch: Int = 1000, alertsPerNewWish: Int = 20) {
        self.maxWishesPerUser = maxWishesPerUser
        self.defaultRadiusKm = defaultRadiusKm
        self.maxRadiusKm = maxRadiusKm
        self.digestHour = digestHour
        self.fanOutBatch = fanOutBatch
        self.alertsPerNewWish = alertsPerNewWish
    }

    /// The first digest hour strictly after `now`: a user's digest runs at most once a day.
    func nextDigest(after now: Date) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? .gmt
        let today = calendar.startOfDay(for: now).addingTimeInterval(TimeInterval(digestHour) * 3600)
        return today > now ? today : today.addingTimeInterval(86400)
    }
}

package struct WishView: Encodable, Sendable {
    let id: UUID
    let book: BookSummary
    let anyEdition: Bool
    let radiusKm: Double
    let pinID: UUID?
    let minCondition: String?
    let createdAt: Date
    let createdMicros: Int64

    var cursor: Cursor { Cursor(micros: createdMicros, id: id) }

    enum CodingKeys: String, CodingKey {
        case id, book
        case anyEdition = "any_edition", radiusKm = "radius_km", pinID = "pin_id", minCondition = "min_condition"
        case createdAt = "created_at"
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id.apiString, forKey: .id)
        try c.encode(book, forKey: .book)
        try c.encode(anyEdition, forKey: .anyEdition)
        try c.encode(radiusKm, forKey: .radiusKm)
        try c.encode(pinID?.apiString, forKey: .pinID)
        try c.encode(minCondition, forKey: .minCondition)
        try c.encode(createdAt, forKey: .createdAt)
    }
}

/// A copy that satisfied one of my wishes when it became available.
package struct AlertView: Encodable, Sendable {
    let id: UUID
    let wish: WishView
    let copy: CopyView
    let distanceKm: Double
    let createdAt: Date
    let createdMicros: Int64

    var cursor: Cursor { Cursor(micros: createdMicros, id: id) }

    enum CodingKeys: String, CodingKey {
        case id, wish, copy
        case distanceKm = "distance_km", createdAt = "created_at"
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id.apiString, forKey: .id)
        try c.encode(wish, forKey: .wish)
        try c.encode(copy, forKey: .copy)
        try c.encode((distanceKm * 100).rounded() / 100, forKey: .distanceKm)
        try c.encode(createdAt, forKey: .createdAt)
    }
}

/// Someone near me with whom books can go both ways.
package struct MatchView: Encodable, Sendable {
    let user: OwnerSummary
    let distanceKm: Double
    let theyHave: [CopyView]
    let iHave: [CopyView]

    enum CodingKeys: String, CodingKey {
        case user
        case distanceKm = "distance_km", theyHave = "they_have", iHave = "i_have"
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(user, forKey: .user)
        try c.encode((distanceKm * 100).rounded() / 100, forKey: .distanceKm)
        try c.encode(theyHave, forKey: .theyHave)
        try c.encode(iHave, forKey: .iHave)
    }
}

/// Field rules for wishes: 400 for the schema's, 422 for the rest.
enum WishValidation {
    static func wish(_ body: NewWishBody, policy: WishPolicy) throws -> NewWish {
        var errors: [FieldError] = []
        var book: WishedBook?
        var rule: AppError?
        switch (body.bookId, body.isbn) {
        case (.set(nil), _):
            errors.append(FieldError("book_id", "must be a UUID, not null"))
        case (_, .set(nil)):
            errors.append(FieldError("isbn", "must be an ISBN, not null"))
        case (.set(let id?), .unchanged):
            if let uuid = UUID(uuidString: id) { book = .id(uuid) } else { errors.append(FieldError("book_id", "must be a UUID")) }
        case (.unchanged, .set(let isbn?)):
            book = try collectFieldErrors(&errors) { .isbn13(try CatalogValidation.isbnFilter(isbn)) }
        // "Exactly one of" is a rule the document states in words (a `oneOf` of `not`s is one
        // that client generators cannot read), so breaking it is a 422, after any 400.
        case (.set, .set):
            rule = AppError.broken("book_id", "give either book_id or isbn, not both")
        case (.unchanged, .unchanged):
            rule = AppError.broken("book_id", "book_id or isbn is required")
        }
        let radius = body.radiusKm ?? policy.defaultRadiusKm
        if !(radius > 0 && radius <= policy.maxRadiusKm) {
            errors.append(FieldError("radius_km", "must be more than 0 and at most \(Int(policy.maxRadiusKm))"))
        }
        var pin: UUID?
        if let raw = body.pinId {
            pin = UUID(uuidString: raw)
            if pin == nil { errors.append(FieldError("pin_id", "must be a UUID")) }
        }
        let condition = try collectFieldErrors(&errors) {
            try body.minCondition.map { raw in
                guard let value = CopyCondition(rawValue: raw) else {
                    throw AppError.invalid("min_condition", "must be one of \(CopyCondition.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                return value
            }
        } ?? nil
        let id = try collectFieldErrors(&errors) { try ClientMadeID.checked(body.id) } ?? nil
        guard errors.isEmpty else { throw AppError.validation(errors) }
        if let rule { throw rule }
        guard let book else { throw AppError.invalid("book_id", "book_id or isbn is required") }
        return NewWish(id: id, book: book, anyEdition: body.anyEdition ?? true, radiusKm: radius, pinID: pin, minCondition: condition)
    }

    /// `?radius_km=` of the matches: the wish default and limit.
    static func radius(_ raw: String?, policy: WishPolicy) throws -> Double {
        guard let raw else { return policy.defaultRadiusKm }
        guard let value = Double(raw), value.isFinite, value > 0, value <= policy.maxRadiusKm else {
            throw AppError.invalid("radius_km", "must be a number more than 0 and at most \(Int(policy.maxRadiusKm))")
        }
        return value
    }
}
