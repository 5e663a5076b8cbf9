import Foundation
import HummingbirdTesting
@testable import BookwormCore

/// Delta sync as a client does it: pages of `GET /v1/sync`, and a local store built from them.
extension TestApp {
    struct SyncPage {
        let changes: [[String: Any]]
        let next: String
        let hasMore: Bool
    }

    func syncPage(_ token: String, since: String? = nil, limit: Int? = nil) async throws -> SyncPage {
        var query: [String] = []
        if let since { query.append("since=\(since)") }
        if let limit { query.append("limit=\(limit)") }
        let response = try await request(.get, "/v1/sync" + (query.isEmpty ? "" : "?" + query.joined(separator: "&")), token: token)
        guard response.status == .ok else { throw TestFailure("sync: \(response.status) \(String(buffer: response.body))") }
        let body = try response.jsonObject()
        return SyncPage(changes: body["changes"] as? [[String: Any]] ?? [], next: body["next"] as? String ?? "",
                        hasMore: body["has_more"] as? Bool ?? false)
    }

    /// Every page from `since` until the last; the changes in order and the final token.
    func syncAll(_ token: String, since: String? = nil, limit: Int? = nil) async throws -> (changes: [[String: Any]], next: String) {
        var changes: [[String: Any]] = []
        var cursor = since
        while true {
            let page = try await syncPage(token, since: cursor, limit: limit)
            changes += page.changes
            cursor = page.next
            if !page.hasMore { return (changes, page.next) }
        }
    }
}

/// A client's local store: "type/id" → the object's JSON (as canonical text, to compare).
struct SyncReplica: Equatable {
    var objects: [String: String] = [:]

    mutating func apply(_ changes: [[String: Any]]) throws {
        for change in changes {
            let key = "\(change["type"] as? String ?? "?")/\(change["id"] as? String ?? "?")"
            if change["op"] as? String == "delete" {
                objects[key] = nil
            } else {
                let data = try JSONSerialization.data(withJSONObject: change["data"] ?? NSNull(), options: [.sortedKeys])
                objects[key] = String(decoding: data, as: UTF8.self)
            }
        }
    }
}
