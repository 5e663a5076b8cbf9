import BookwormCore
import Catalog
import Foundation
import Places

package enum PostKind: String, CaseIterable, Sendable {
    /// "for trade"
    case offer
    /// "asking for"
    case wanted
}

/// A post as anyone sees it: who wrote it and which book it is about, so a client renders a
/// feed page from one response.
package struct PostView: Encodable, Sendable {
    package let id: UUID
    let kind: String
    let body: String
    let author: OwnerSummary
    let book: BookSummary?
    let copyID: UUID?
    let createdAt: Date
    /// Only in the nearby feed: to the pin's public point, never to an exact home.
    let distanceKm: Double?
    /// Keyset position, not part of the JSON.
    let createdMicros: Int64

    var cursor: Cursor { Cursor(micros: createdMicros, id: id) }

    enum CodingKeys: String, CodingKey {
        case id, kind, body, author, book
        case copyID = "copy_id", createdAt = "created_at", distanceKm = "distance_km"
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.apiString, forKey: .id)
        try container.encode(kind, forKey: .kind)
        try container.encode(body, forKey: .body)
        try container.encode(author, forKey: .author)
        try container.encode(book, forKey: .book)
        try container.encode(copyID?.apiString, forKey: .copyID)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(distanceKm.map(Nearby.rounded), forKey: .distanceKm)
    }
}

extension PostView: JSONWritable {
    /// The same JSON as `encode(to:)`, keys in sorted order (see `JSONWriter`).
    package func write(to json: inout JSONWriter) {
        json.object { json in
            json.key("author"); author.write(to: &json)
            json.key("body"); json.string(body)
            json.key("book")
            if let book { book.write(to: &json) } else { json.null() }
            json.key("copy_id"); json.uuid(copyID)
            json.key("created_at"); json.date(createdAt)
            json.key("distance_km")
            if let distanceKm { json.number(Nearby.rounded(distanceKm)) } else { json.null() }
            json.key("id"); json.uuid(id)
            json.key("kind"); json.string(kind)
        }
    }
}

/// What a feed page may be narrowed by.
package struct FeedFilter: Sendable {
    package var kind: PostKind?
    /// A username, matched case-insensitively.
    var author: String?
    package var bookID: UUID?
    /// With a location: only posts whose pin's public point is within the radius.
    package var near: NearbyArea?
    /// The signed-in reader: posts of anyone they blocked, or who blocked them, are left out.
    package var viewerID: UUID?

    package init() {}
}

/// Where the nearby feed looks.
package struct NearbyArea: Sendable {
    let origin: GeoPoint
    let radiusKm: Double

    package init(origin: GeoPoint, radiusKm: Double) {
        self.origin = origin
        self.radiusKm = radiusKm
    }
}

/// How much one account may post.
package struct FeedPolicy: Sendable {
    package var postsPerHour: Int
    /// The same body again within this many seconds is a 409.
    var duplicateWindow: TimeInterval

    package init(postsPerHour: Int = 20, duplicateWindow: TimeInterval = 60) {
        self.postsPerHour = postsPerHour
        self.duplicateWindow = duplicateWindow
    }
}

/// A validated new post; `pinID` nil means "the author's default pin".
package struct NewPost: Sendable {
    /// Made by the client (`ClientMadeID`), or nil for the server to choose.
    var id: UUID? = nil
    let kind: PostKind
    let body: String
    let bookID: UUID?
    let copyID: UUID?
    let pinID: UUID?
}

struct CreatePostBody: StrictBody {
    let id: UUID?
    let kind: String
    let body: String
    let bookID: UUID?
    let copyID: UUID?
    let pinID: UUID?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case id, kind, body
        case bookID = "book_id", copyID = "copy_id", pinID = "pin_id"
    }
}

package enum FeedValidation {
    static let maxBodyLength = 2000

    package static func kind(_ raw: String) throws -> PostKind {
        guard let kind = PostKind(rawValue: raw) else {
            throw AppError.invalid("kind", "must be one of: offer, wanted")
        }
        return kind
    }

    /// Trimmed, CRLF taken as a newline; other control characters (tabs included) are refused
    /// rather than stripped, so what is stored is what the author saw. Counted in Unicode
    /// scalars, as PostgreSQL's `char_length` counts them.
    package static func body(_ raw: String, field: String = "body", maxLength: Int = maxBodyLength) throws -> String {
        let value = crlfAsNewline(raw).trimmingCharacters(in: .whitespacesAndNewlines)
        let length = value.unicodeScalars.count
        guard length >= 1 else { throw AppError.invalid(field, "must not be empty") }
        guard length <= maxLength else {
            throw AppError.invalid(field, "must be at most \(maxLength) characters (is \(length))")
        }
        let control = value.unicodeScalars.contains { $0 != "\n" && $0.properties.generalCategory == .control }
        guard !control else { throw AppError.invalid(field, "must not contain control characters other than newline") }
        return value
    }

    /// CRLF read as LF, scalar by scalar: string replacement works on characters, and a CR LF
    /// next to a modifier or combining mark is not one character there, so it was left as CR.
    static func crlfAsNewline(_ raw: String) -> String {
        let scalars = Array(raw.unicodeScalars)
        var result = String.UnicodeScalarView()
        var index = 0
        while index < scalars.count {
            if scalars[index] == "\r", index + 1 < scalars.count, scalars[index + 1] == "\n" {
                result.append("\n")
                index += 2
            } else {
                result.append(scalars[index])
                index += 1
            }
        }
        return String(result)
    }

    static func newPost(_ body: CreatePostBody) throws -> NewPost {
        var errors: [FieldError] = []
        let postKind = try collectFieldErrors(&errors) { try Self.kind(body.kind) }
        let text = try collectFieldErrors(&errors) { try Self.body(body.body) }
        let id = try collectFieldErrors(&errors) { try ClientMadeID.checked(body.id) } ?? nil
        guard errors.isEmpty, let postKind, let text else { throw AppError.validation(errors) }
        return NewPost(id: id, kind: postKind, body: text, bookID: body.bookID, copyID: body.copyID, pinID: body.pinID)
    }
}
