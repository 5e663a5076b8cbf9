import Foundation
import Testing
import Hummingbird
import HummingbirdTesting
import PostgresNIO
@testable import BookwormCore
@testable import Mail
@testable import Accounts
@testable import Places
@testable import Catalog
@testable import Discovery
@testable import Exchange
@testable import BookwormApp

// From LibraryTests: data made through the API, used by several rooms' tests.
extension TestApp {
    @discardableResult
    func addCopy(_ token: String, title: String = "A Book", authors: [String] = ["Someone"], isbn: String? = nil,
                 condition: String = "good") async throws -> [String: Any] {
        var body: [String: any Sendable] = ["title": title, "authors": authors, "condition": condition]
        if let isbn { body["isbn"] = isbn }
        let response = try await request(.post, "/v1/me/copies", json: body, token: token)
        guard response.status == .created else { throw TestFailure("add copy: \(response.status) \(String(buffer: response.body))") }
        return try response.jsonObject()
    }

    func page(_ path: String, token: String? = nil) async throws -> (ids: [String], next: String?) {
        let body = try await request(.get, path, token: token).jsonObject()
        let data = body["data"] as? [[String: Any]] ?? []
        return (data.compactMap { $0["id"] as? String }, body["next_cursor"] as? String)
    }
}

// From PinsTests: data made through the API, used by several rooms' tests.
extension TestApp {
    @discardableResult
    func addPin(_ token: String, label: String = "Home", latitude: Double = 52.52, longitude: Double = 13.405,
                kind: String = "home", isDefault: Bool? = nil) async throws -> [String: Any] {
        var body: [String: any Sendable] = ["label": label, "latitude": latitude, "longitude": longitude, "kind": kind]
        if let isDefault { body["is_default"] = isDefault }
        let response = try await request(.post, "/v1/me/pins", json: body, token: token)
        guard response.status == .created else { throw TestFailure("add pin: \(response.status) \(String(buffer: response.body))") }
        return try response.jsonObject()
    }

    func pins(_ token: String) async throws -> [[String: Any]] {
        try await request(.get, "/v1/me/pins", token: token).jsonObject()["data"] as? [[String: Any]] ?? []
    }
}

// From FeedTests: data made through the API, used by several rooms' tests.
extension TestApp {
    @discardableResult
    func addPost(_ token: String, kind: String = "offer", body: String = "Swapping paperbacks",
                 extra: [String: any Sendable] = [:]) async throws -> [String: Any] {
        var json: [String: any Sendable] = ["kind": kind, "body": body]
        json.merge(extra) { $1 }
        let response = try await request(.post, "/v1/posts", json: json, token: token)
        guard response.status == .created else { throw TestFailure("add post: \(response.status) \(String(buffer: response.body))") }
        return try response.jsonObject()
    }

    /// Every post id of a feed, following cursors.
    func feedIDs(_ path: String, token: String? = nil, limit: Int = 100) async throws -> [String] {
        var ids: [String] = []
        var cursor: String?
        let separator = path.contains("?") ? "&" : "?"
        repeat {
            let url = path + separator + "limit=\(limit)" + (cursor.map { "&cursor=\($0)" } ?? "")
            let response = try await request(.get, url, token: token)
            guard response.status == .ok else { throw TestFailure("feed \(url): \(response.status) \(String(buffer: response.body))") }
            let body = try response.jsonObject()
            ids += (body["data"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
            cursor = body["next_cursor"] as? String
        } while cursor != nil
        return ids
    }

    /// Posts inserted straight into the table (past the hourly limit), oldest first.
    func insertPosts(author: String, count: Int, pin: String? = nil) async throws -> [String] {
        let authorID = try #require(UUID(uuidString: author))
        let pinID = pin.flatMap(UUID.init(uuidString:))
        var ids: [String] = []
        for index in 0..<count {
            let rows = try await db.query("""
                INSERT INTO posts (author_id, kind, body, pin_id) VALUES (\(authorID), 'offer', \("post \(index)"), \(pinID))
                RETURNING id
                """)
            for try await id in rows.decode(UUID.self) { ids.append(id.apiString) }
        }
        return ids
    }
}

extension TestApp {
    /// The status of `GET path` for each token in turn (nil: signed out).
    func statuses(_ path: String, tokens: [String?]) async throws -> [HTTPResponse.Status] {
        var statuses: [HTTPResponse.Status] = []
        for token in tokens { statuses.append(try await request(.get, path, token: token).status) }
        return statuses
    }
}
