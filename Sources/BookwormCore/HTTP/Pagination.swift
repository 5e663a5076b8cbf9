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

    package var encoded: String { SecureRandom.base64URL(Array("\(micros):\(id.apiString)".utf8)) }

    package init(micros: Int64, id: UUID) {
        self.micros = micros
        self.id = id
    }

    package init(encoded text: String) throws {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard text.count <= 128, let data = Data(base64Encoded: base64),
              let decoded = String(data: data, encoding: .utf8) else {
            throw AppError.invalid("cursor", "is malformed")
        }
        let parts = decoded.split(separator: ":")
        guard parts.count == 2, let micros = Int64(parts[0]), let id = UUID(uuidString: String(parts[1])) else {
            throw AppError.invalid("cursor", "is malformed")
        }
        self.init(micros: micros, id: id)
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
        after = try request.uri.queryParameters["cursor"].map { try Cursor(encoded: String($0)) }
    }

    /// `?limit=` alone, for lists whose cursor is not a time (nearest-first lists).
    package static func limit(_ request: Request) throws -> Int {
        guard let raw = request.uri.queryParameters["limit"] else { return defaultLimit }
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
    /// A query parameter as trimmed text, nil when absent or empty; over `maxLength` is a 400.
    package func queryText(_ name: String, maxLength: Int = 200) throws -> String? {
        guard let raw = uri.queryParameters[Substring(name)] else { return nil }
        let value = String(raw).trimmingCharacters(in: .whitespacesAndNewlines)
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
