import Foundation
import Hummingbird

/// One page of a list: `{"data": [...], "next_cursor": "…" | null}`.
package struct Page<Item: Encodable & Sendable>: Encodable, Sendable {
    let data: [Item]
    let nextCursor: String?

    package init(data: [Item], nextCursor: String? = nil) {
        self.data = data
        self.nextCursor = nextCursor
    }

    package enum CodingKeys: String, CodingKey {
        case data
        case nextCursor = "next_cursor"
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(data, forKey: .data)
        try container.encode(nextCursor, forKey: .nextCursor)
    }
}

/// A keyset position: the sort timestamp in microseconds and the row id that breaks ties.
/// Opaque to clients (base64url); page N costs what page 1 costs.
package struct Cursor: Equatable, Sendable {
    package let micros: Int64
    package let id: UUID

    /// Exactly 32 base64url characters: 8 bytes of position, 16 of id. Every string of that
    /// shape decodes, so the schema's pattern says precisely what is accepted.
    package static let pattern = "^[A-Za-z0-9_-]{32}$"
    /// The positions a time cursor may name (years 1 to 9999), so SQL time arithmetic never overflows.
    package static let microsRange: ClosedRange<Int64> = -62_135_596_800_000_000...253_402_300_799_999_999

    package var encoded: String {
        var bytes = withUnsafeBytes(of: micros.bigEndian) { Array($0) }
        bytes += withUnsafeBytes(of: id.uuid) { Array($0) }
        return SecureRandom.base64URL(bytes)
    }

    package init(micros: Int64, id: UUID) {
        self.micros = micros
        self.id = id
    }

    /// `raw: true` keeps the position's bits as they are (cursors that carry a distance).
    package init(encoded text: String, raw: Bool = false) throws {
        guard text.utf8.count == 32, text.utf8.allSatisfy(Self.isBase64URL),
              let data = Data(base64URL: text),
              data.count == 24 else {
            throw AppError.invalid("cursor", "must be a cursor returned by this API (32 characters)")
        }
        let bytes = [UInt8](data)
        let position = bytes[0..<8].reduce(Int64(0)) { $0 << 8 | Int64($1) }
        let id = UUID(uuid: (bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15],
                             bytes[16], bytes[17], bytes[18], bytes[19], bytes[20], bytes[21], bytes[22], bytes[23]))
        self.init(micros: raw ? position : min(max(position, Self.microsRange.lowerBound), Self.microsRange.upperBound), id: id)
    }

    private static func isBase64URL(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a) || byte == 0x2d || byte == 0x5f
    }
}

/// `?limit=` and `?cursor=` as API.md defines them.
package struct PageRequest: Sendable {
    package let limit: Int
    package let after: Cursor?

    static let defaultLimit = 20
    static let maxLimit = 100

    package init(_ request: Request) throws {
        limit = try Self.limit(request)
        after = try request.queryValue("cursor").map { try Cursor(encoded: $0) }
    }

    /// `?limit=` alone, for lists whose cursor is not a time (nearest-first lists).
    package static func limit(_ request: Request) throws -> Int {
        guard let raw = request.queryValue("limit") else { return defaultLimit }
        guard let value = Int(String(raw)), (1...maxLimit).contains(value) else {
            throw AppError.invalid("limit", "must be a whole number from 1 to \(maxLimit)")
        }
        return value
    }

    /// Trims the one extra row fetched to learn whether another page exists.
    package func page<Row, Item: Encodable & Sendable>(_ rows: [Row], cursor: (Row) -> Cursor, item: (Row) -> Item) -> Page<Item> {
        let visible = Array(rows.prefix(limit))
        let next = rows.count > limit ? visible.last.map { cursor($0).encoded } : nil
        return Page(data: visible.map(item), nextCursor: next)
    }
}

extension Request {
    /// A query parameter decoded as a form does it (`+` is a space, then percent escapes), the
    /// first when repeated; nil when absent.
    package func queryValue(_ name: String) -> String? {
        guard let query = uri.query else { return nil }
        // Walked in place: splitting the query into arrays for each of a request's several
        // lookups was a few per cent of a nearby request's CPU.
        let bytes = query.utf8
        var start = bytes.startIndex
        while start < bytes.endIndex {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "&")) ?? bytes.endIndex
            let equals = bytes[start..<end].firstIndex(of: UInt8(ascii: "="))
            let key = Substring(bytes[start..<(equals ?? end)])
            if !key.isEmpty, Self.formDecoded(key) == name {
                guard let equals else { return "" }
                return Self.formDecoded(Substring(bytes[bytes.index(after: equals)..<end])) ?? ""
            }
            start = end < bytes.endIndex ? bytes.index(after: end) : end
        }
        return nil
    }

    /// `+` as a space and `%XX` as its byte; nil for a broken escape or bytes that are not UTF-8.
    /// Text without either is returned as it is: Foundation's replacing and percent decoding of
    /// every parameter were a tenth of a feed request's CPU.
    static func formDecoded(_ text: Substring) -> String? {
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "%") }) else { return String(text) }
        return InputSanity.percentDecoded(text, plusIsSpace: true).flatMap { String(validating: $0, as: UTF8.self) }
    }

    /// Whether a first or last byte may be trimmed: ASCII white space, or the lead byte of a
    /// character Foundation may count as white space; trimming is skipped when neither end is.
    private static func isSpace(_ byte: UInt8) -> Bool { byte <= 0x20 || byte == 0x7f || byte >= 0x80 }

    /// A query parameter as trimmed text, nil when absent or empty; over `maxLength` is a 400.
    package func queryText(_ name: String, maxLength: Int = 200) throws -> String? {
        guard let raw = queryValue(name) else { return nil }
        let value = raw.utf8.first.map(Self.isSpace) == false && raw.utf8.last.map(Self.isSpace) == false
            ? raw : raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard value.count <= maxLength else { throw AppError.invalid(name, "must be at most \(maxLength) characters") }
        return value.isEmpty ? nil : value
    }
}

extension Parameters {
    /// A UUID path parameter; anything else is a 400 naming it.
    package func uuid(_ name: String) throws -> UUID {
        guard let raw = get(name), let id = UUID(uuidString: raw) else {
            throw AppError.invalid(name, "must be a UUID")
        }
        return id
    }
}
