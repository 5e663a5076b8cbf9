import Accounts
import BookwormCore
import Foundation
import Places

package enum CopyCondition: String, CaseIterable, Sendable {
    case new, likeNew = "like_new", good, fair, poor
}

package enum CopyStatus: String, CaseIterable, Sendable {
    case available, reserved, lent, traded, withdrawn

    /// Set by trades only (an accepted trade reserves, a completed loan lends).
    var isTradeHeld: Bool { self == .reserved || self == .lent }
}

/// A book (edition) as the API shows it.
package struct BookView: Encodable, Sendable {
    package let id: UUID
    let isbn13: String?
    let title: String
    let authors: [String]
    let publisher: String?
    let publishedYear: Int?
    let language: String?
    let availableCopies: Int
    /// The other editions of the same work; only a single book's page lists them.
    var editions: [BookSummary]?

    enum CodingKeys: String, CodingKey {
        case id, isbn13, isbn10, title, authors, publisher, language, editions
        case publishedYear = "published_year", availableCopies = "available_copies"
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.apiString, forKey: .id)
        try container.encode(isbn13, forKey: .isbn13)
        try container.encode(isbn13.flatMap { try? ISBN($0) }?.isbn10, forKey: .isbn10)
        try container.encode(title, forKey: .title)
        try container.encode(authors, forKey: .authors)
        try container.encode(publisher, forKey: .publisher)
        try container.encode(publishedYear, forKey: .publishedYear)
        try container.encode(language, forKey: .language)
        try container.encode(availableCopies, forKey: .availableCopies)
        try container.encodeIfPresent(editions, forKey: .editions)
    }
}

package struct BookSummary: Encodable, Sendable {
    package let id: UUID
    package let isbn13: String?
    package let title: String
    package let authors: [String]

    package init(id: UUID, isbn13: String? = nil, title: String, authors: [String]) {
        self.id = id
        self.isbn13 = isbn13
        self.title = title
        self.authors = authors
    }

    package enum CodingKeys: String, CodingKey { case id, isbn13, title, authors }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.apiString, forKey: .id)
        try container.encode(isbn13, forKey: .isbn13)
        try container.encode(title, forKey: .title)
        try container.encode(authors, forKey: .authors)
    }
}

/// Who owns a copy, as anyone may see it: never the email.
package struct OwnerSummary: Encodable, Sendable {
    package let id: UUID
    package let username: String
    package let displayName: String?

    package init(id: UUID, username: String, displayName: String? = nil) {
        self.id = id
        self.username = username
        self.displayName = displayName
    }

    package enum CodingKeys: String, CodingKey {
        case id, username
        case displayName = "display_name"
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.apiString, forKey: .id)
        try container.encode(username, forKey: .username)
        try container.encode(displayName, forKey: .displayName)
    }
}

package struct CopyView: Encodable, Sendable {
    package let id: UUID
    package let book: BookSummary
    package let owner: OwnerSummary
    let condition: String
    package let status: String
    let notes: String?
    package let pinID: UUID?
    let photoID: String?
    /// Nil until the photo has its sizes (an upload stored before photos were made anew).
    let photo: PhotoInfo?
    package let createdAt: Date
    package let updatedAt: Date
    /// Keyset position, not part of the JSON.
    let createdMicros: Int64

    package var cursor: Cursor { Cursor(micros: createdMicros, id: id) }

    package init(id: UUID, book: BookSummary, owner: OwnerSummary, condition: String, status: String, notes: String? = nil, pinID: UUID? = nil, photoID: String? = nil, photo: PhotoInfo? = nil, createdAt: Date, updatedAt: Date, createdMicros: Int64) {
        self.id = id
        self.book = book
        self.owner = owner
        self.condition = condition
        self.status = status
        self.notes = notes
        self.pinID = pinID
        self.photoID = photoID
        self.photo = photo
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.createdMicros = createdMicros
    }

    package enum CodingKeys: String, CodingKey {
        case id, book, owner, condition, status, notes
        case photo, pinID = "pin_id", photoURL = "photo_url", createdAt = "created_at", updatedAt = "updated_at"
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.apiString, forKey: .id)
        try container.encode(book, forKey: .book)
        try container.encode(owner, forKey: .owner)
        try container.encode(condition, forKey: .condition)
        try container.encode(status, forKey: .status)
        try container.encode(notes, forKey: .notes)
        try container.encode(pinID?.apiString, forKey: .pinID)
        try container.encode(photo, forKey: .photo)
        try container.encode(photoID.map { "/v1/photos/\($0)" }, forKey: .photoURL)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(updatedAt, forKey: .updatedAt)
    }
}

/// Validated input for a new edition.
package struct NewBook: Sendable {
    let isbn: ISBN?
    let title: String
    let authors: [String]
    let publisher: String?
    let publishedYear: Int?
    let language: String?
}

struct CreateBookBody: StrictBody {
    let isbn: String?
    let title: String
    let authors: [String]
    let publisher: String?
    let publishedYear: Int?
    let language: String?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case isbn, title, authors, publisher, language
        case publishedYear = "published_year"
    }
}

struct CreateCopyBody: StrictBody {
    /// Made by the client (`ClientMadeID`), or nil for the server to choose.
    let id: UUID?
    let bookID: UUID?
    let isbn: String?
    let title: String?
    let authors: [String]?
    let publisher: String?
    let publishedYear: Int?
    let language: String?
    let condition: String
    let notes: String?
    let pinID: UUID?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case id, isbn, title, authors, publisher, language, condition, notes
        case bookID = "book_id", publishedYear = "published_year", pinID = "pin_id"
    }
}

/// `PATCH /v1/copies/{id}`: null clears the notes, or the pin (the copy then stands at its
/// owner's default pin); a copy always has a condition and a status.
struct UpdateCopyBody: PatchBody {
    var condition: String?
    var status: String?
    var notes: FieldUpdate<String> = .unchanged
    var pinID: FieldUpdate<UUID> = .unchanged

    enum CodingKeys: String, CodingKey, CaseIterable {
        case condition, status, notes
        case pinID = "pin_id"
    }

    static let nullableKeys: [CodingKeys] = [.notes, .pinID]

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        condition = try container.decodeIfPresent(String.self, forKey: .condition)
        status = try container.decodeIfPresent(String.self, forKey: .status)
        notes = try FieldUpdate(container, .notes)
        pinID = try FieldUpdate(container, .pinID)
    }
}

// The same JSON as the `Encodable` forms above, keys in sorted order (see `JSONWriter`).

extension BookSummary: JSONWritable {
    package func write(to json: inout JSONWriter) {
        json.object { json in
            json.key("authors"); json.strings(authors)
            json.key("id"); json.uuid(id)
            json.key("isbn13"); json.string(isbn13)
            json.key("title"); json.string(title)
        }
    }
}

extension OwnerSummary: JSONWritable {
    package func write(to json: inout JSONWriter) {
        json.object { json in
            json.key("display_name"); json.string(displayName)
            json.key("id"); json.uuid(id)
            json.key("username"); json.string(username)
        }
    }
}

extension CopyView: JSONWritable {
    package func write(to json: inout JSONWriter) { write(to: &json, nearby: nil) }

    /// `nearby` adds a nearby copy's `distance_km` and `pin` in their sorted places.
    package func write(to json: inout JSONWriter, nearby: (distanceKm: Double, place: PublicPlace)?) {
        json.object { json in
            json.key("book"); book.write(to: &json)
            json.key("condition"); json.string(condition)
            json.key("created_at"); json.date(createdAt)
            if let nearby { json.key("distance_km"); json.number(nearby.distanceKm) }
            json.key("id"); json.uuid(id)
            json.key("notes"); json.string(notes)
            json.key("owner"); owner.write(to: &json)
            json.key("photo")
            if let photo { photo.write(to: &json) } else { json.null() }
            json.key("photo_url"); json.string(photoID.map { "/v1/photos/\($0)" })
            if let nearby { nearby.place.writePin(to: &json) }
            json.key("pin_id"); json.uuid(pinID)
            json.key("status"); json.string(status)
            json.key("updated_at"); json.date(updatedAt)
        }
    }
}

extension PublicPlace {
    /// A nearby copy's `pin`, key and object.
    func writePin(to json: inout JSONWriter) {
        json.key("pin")
        json.object { json in
            json.key("latitude"); json.number(latitude)
            json.key("longitude"); json.number(longitude)
        }
    }
}
