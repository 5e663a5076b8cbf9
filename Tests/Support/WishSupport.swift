import Foundation
import Logging
import HummingbirdTesting
import PostgresNIO
@testable import BookwormCore
@testable import Discovery
@testable import BookwormApp

// Wishes, alerts and matches made through the API, used by the shelf tests.
extension TestApp {
    /// A verified user with a default pin at the point, mailed as `alerts` says.
    func wisher(at latitude: Double = 52.52, _ longitude: Double = 13.405, alerts: String = "instant") async throws -> Account {
        let account = try await registerTrader()
        try await addPin(account.token, latitude: latitude, longitude: longitude)
        let patched = try await request(.patch, "/v1/me", json: ["alerts": alerts], token: account.token)
        guard patched.status == .ok else { throw TestFailure("alerts: \(patched.status)") }
        return account
    }

    /// `POST /v1/me/wishes` for a book id.
    func wish(_ token: String, book: String, extra: [String: any Sendable] = [:]) async throws -> TestResponse {
        var body: [String: any Sendable] = ["book_id": book]
        body.merge(extra) { $1 }
        return try await request(.post, "/v1/me/wishes", json: body, token: token)
    }

    /// A book with no copy (`POST /v1/books`), for wishes that must not find one on offer yet.
    func book(_ token: String, title: String, authors: [String] = ["Someone"], isbn: String? = nil) async throws -> String {
        var body: [String: any Sendable] = ["title": title, "authors": authors]
        if let isbn { body["isbn"] = isbn }
        let response = try await request(.post, "/v1/books", json: body, token: token)
        guard let id = try response.jsonObject()["id"] as? String else { throw TestFailure("book: \(response.status)") }
        return id
    }

    /// A copy through the API; returns (copy id, book id).
    func offer(_ token: String, title: String, authors: [String] = ["Someone"], isbn: String? = nil,
               condition: String = "good") async throws -> (copy: String, book: String) {
        let copy = try await addCopy(token, title: title, authors: authors, isbn: isbn, condition: condition)
        guard let id = copy["id"] as? String, let book = (copy["book"] as? [String: Any])?["id"] as? String else {
            throw TestFailure("copy without ids")
        }
        return (id, book)
    }

    func alerts(_ token: String) async throws -> [[String: Any]] {
        let response = try await request(.get, "/v1/me/alerts?limit=100", token: token)
        guard response.status == .ok else { throw TestFailure("alerts: \(response.status) \(String(buffer: response.body))") }
        return try response.jsonObject()["data"] as? [[String: Any]] ?? []
    }

    /// Jobs of `kind` queued or running.
    func jobRows(kind: String) async throws -> Int {
        let rows = try await db.query("SELECT count(*)::int8 FROM jobs WHERE kind = \(kind)")
        for try await count in rows.decode(Int64.self) { return Int(count) }
        return 0
    }

    /// Alert rows in the table for the user (whatever the list shows).
    func alertRows(_ user: String) async throws -> Int {
        let rows = try await db.query("SELECT count(*)::int8 FROM alerts WHERE user_id = \(UUID(uuidString: user))")
        for try await count in rows.decode(Int64.self) { return Int(count) }
        return 0
    }

    /// Queued alert mails: (recipient, subject, rendered message).
    func alertMails() async throws -> [(to: String, subject: String, content: String)] {
        var mails: [(String, String, String)] = []
        let rows = try await db.query("SELECT recipient, subject, content FROM outbox_messages WHERE kind = 'alert' ORDER BY created_at, id")
        for try await row in rows.decode((String, String, String).self) { mails.append(row) }
        return mails.map { (to: $0.0, subject: $0.1, content: $0.2) }
    }

    func matches(_ token: String, query: String = "") async throws -> [[String: Any]] {
        let response = try await request(.get, "/v1/me/matches" + query, token: token)
        guard response.status == .ok else { throw TestFailure("matches: \(response.status) \(String(buffer: response.body))") }
        return try response.jsonObject()["data"] as? [[String: Any]] ?? []
    }

    /// Runs due jobs with a wish policy of the test's choosing (a small fan-out batch, say).
    func runJobs(wishes: WishPolicy) async throws {
        var config = Config.forTests(settings)
        config.clock = clock
        config.wishes = wishes
        let runner = backgroundJobs(client: db, config: config, logger: Logger(label: "test-jobs"))
        try await runner.prepare()
        while try await runner.runDue() > 0 {}
    }
}
