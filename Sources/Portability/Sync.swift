import BookwormCore
import Foundation

/// How long tombstones stay and how large a sync page may be.
package struct SyncPolicy: Sendable {
    /// Deletions are kept this long; an older token gets 410 `sync_token_expired`.
    package var tombstoneDays: Int = 30
    package var defaultLimit = 100
    package var maxLimit = 1000

    package init() {}
}

/// Where a client's sync stands: everything up to (xid, id) of this data epoch is in its store.
/// Opaque to clients (base64url of `1.<epoch>.<xid>.<id>`).
package struct SyncToken: Equatable, Sendable {
    package let epoch: String
    /// The transaction id (xid8).
    package let xid: UInt64
    package let id: Int64

    static let start = SyncToken(epoch: "", xid: 0, id: 0)

    package var encoded: String {
        Data("1.\(epoch).\(xid).\(id)".utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Outside the token alphabet (base64url, 1 to 120 characters): 400, the schema's pattern.
    /// In it, but not a token this service wrote: 422 naming `since`.
    package init(encoded: String) throws {
        guard (1...120).contains(encoded.count),
              encoded.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_") })
        else { throw AppError.invalid("since", "must be a token from `next` (1 to 120 characters of A-Z, a-z, 0-9, - and _)") }
        let notOurs = AppError.broken("since", "is not a sync token of this service: sync again without since")
        guard let data = Data(base64URL: encoded), let text = String(data: data, encoding: .utf8) else { throw notOurs }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "1", parts[1].count == 16, parts[1].allSatisfy(\.isHexDigit),
              let xid = UInt64(parts[2]), let id = Int64(parts[3]), id >= 0 else { throw notOurs }
        self.init(epoch: String(parts[1]), xid: xid, id: id)
    }

    package init(epoch: String, xid: UInt64, id: Int64) {
        self.epoch = epoch
        self.xid = xid
        self.id = id
    }
}

/// One object that changed: its latest state (`upsert`, with the shape its GET returns) or its
/// tombstone (`delete`: gone, or no longer mine).
struct SyncChange: Encodable, Sendable {
    let type: String
    let id: UUID
    let op: String
    let data: (any Encodable & Sendable)?

    enum CodingKeys: String, CodingKey { case type, id, op, data }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(type, forKey: .type)
        try container.encode(id.apiString, forKey: .id)
        try container.encode(op, forKey: .op)
        if let data { try container.encode(data, forKey: .data) }
    }
}

struct SyncPage: Encodable, Sendable {
    let changes: [SyncChange]
    let next: String
    let hasMore: Bool

    enum CodingKeys: String, CodingKey { case changes, next, hasMore = "has_more" }
}

/// A change row as the log holds it.
struct SyncChangeRow: Sendable {
    let kind: String
    let objectID: UUID
    let xid: UInt64
    let id: Int64
}
