import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import Accounts
@testable import BookwormCore
@testable import BookwormTestSupport

@Suite struct FeedLimitsTests {
    @Test func postingPastTheHourlyLimitIsThrottledAndDeletingDoesNotFreeASlot() async throws {
        try await withApp(configure: { $0.feed.postsPerHour = 3 }) { app in
            let alice = try await app.register()
            let bob = try await app.register()
            var ids: [String] = []
            for index in 0..<3 { ids.append(try #require(try await app.addPost(alice.token, body: "post \(index)")["id"] as? String)) }
            let refused = try await app.request(.post, "/v1/posts", json: ["kind": "offer", "body": "one more"], token: alice.token)
            #expect(refused.status == .tooManyRequests)
            #expect(refused.isProblem)
            let retryAfter = try #require(refused.headers[.retryAfter].flatMap { Int($0) })
            #expect(retryAfter > 3500 && retryAfter <= 3600)
            #expect(try await app.request(.delete, "/v1/posts/\(ids[0])", token: alice.token).status == .noContent)
            #expect(try await app.request(.post, "/v1/posts", json: ["kind": "offer", "body": "after delete"],
                                          token: alice.token).status == .tooManyRequests)
            // The limit is per author.
            try await app.addPost(bob.token, body: "bob's first")
            #expect(try await app.feedIDs("/v1/posts").count == 3)
        }
    }

    @Test func parallelPostsCannotOvershootTheLimit() async throws {
        // A connection for each request, so none waits for the pool behind the throttle lock on a loaded machine.
        try await withApp(configure: { $0.feed.postsPerHour = 3; $0.databasePoolSize = 12 }) { app in
            let alice = try await app.register()
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for index in 0..<10 {
                    group.addTask {
                        try await app.request(.post, "/v1/posts", json: ["kind": "offer", "body": "parallel \(index)"],
                                              token: alice.token).status
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == .created }.count == 3)
            #expect(statuses.filter { $0 == .tooManyRequests }.count == 7, "\(statuses)")
            #expect(try await app.feedIDs("/v1/posts").count == 3)
        }
    }

    @Test func theSameBodyTwiceWithinTheWindowIsAConflict() async throws {
        try await withApp { app in
            let alice = try await app.register()
            let bob = try await app.register()
            try await app.addPost(alice.token, body: "Trading sci-fi")
            let again = try await app.request(.post, "/v1/posts", json: ["kind": "wanted", "body": "  Trading sci-fi "],
                                              token: alice.token)
            #expect(again.status == .conflict)
            #expect(try again.problemFields() == ["body"])
            // Someone else may say the same thing; so may the author once the minute has passed.
            try await app.addPost(bob.token, body: "Trading sci-fi")
            try await app.db.query("UPDATE posts SET created_at = created_at - interval '61 seconds'")
            try await app.addPost(alice.token, body: "Trading sci-fi")
            #expect(try await app.feedIDs("/v1/posts?author=\(alice.username)").count == 2)
        }
    }

    /// Counted by pg_stat_statements in this test's own database: a page of 50 runs as many
    /// statements as a page of 2, for the global and the nearby feed alike.
    @Test func aFeedPageIsOneStatementWhateverItsLength() async throws {
        try await withApp { app in
            try await app.db.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            let viewer = try await app.register()
            var authors: [TestApp.Account] = []
            for _ in 0..<5 {
                let author = try await app.register()
                try await app.addPin(author.token, kind: "meetup")
                let copy = try await app.addCopy(author.token, title: "Book of \(author.username)")
                for index in 0..<12 {
                    try await app.addPost(author.token, body: "post \(index)",
                                          extra: index % 2 == 0 ? ["copy_id": copy["id"] as? String ?? ""] : [:])
                }
                authors.append(author)
            }
            for feed in ["/v1/posts?", "/v1/posts?latitude=52.52&longitude=13.405&"] {
                var counts: [Int] = [], ran: [[String: Int]] = []
                for limit in [2, 50] {
                    let before = try await app.statementCounts()
                    let response = try await app.request(.get, feed + "limit=\(limit)", token: viewer.token)
                    let after = try await app.statementCounts()
                    #expect((try response.jsonObject()["data"] as? [Any])?.count == limit)
                    ran.append(after.filter { $0.value != before[$0.key] })
                    counts.append(TestApp.runs(since: before, now: after).values.reduce(0, +))
                }
                #expect(counts[0] == counts[1], "\(feed): \(counts), statements run: \(ran)")
                // The nearby feed's grid read runs in a transaction of its own, to set its plan
                // mode: BEGIN, set_config and COMMIT are three more, whatever the page's length.
                #expect(counts[0] <= (feed.contains("latitude") ? 5 : 2), "\(feed): \(counts)")
            }
        }
    }
}

extension TestApp {
    /// Statements run so far in this test's database, by text, the counting query included, the
    /// session lookup not: `SessionCache` answers it without a statement once it listens. Nor a
    /// listener's `LISTEN`, which comes once per connection, not per page. (On a loaded machine
    /// one page once counted one more statement than the other; which one went unrecorded, so
    /// the test now names what ran when the counts differ.)
    func statementCounts() async throws -> [String: Int] {
        let rows = try await db.query("""
            SELECT query, sum(calls)::int8 FROM pg_stat_statements
            WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
              AND query NOT LIKE \(SessionLookupSQL.sql.prefix(30) + "%") AND query NOT ILIKE 'LISTEN %'
            GROUP BY query
            """)
        var counts: [String: Int] = [:]
        for try await (query, calls) in rows.decode((String, Int).self) { counts[query] = calls }
        return counts
    }

    /// Each statement's runs between two `statementCounts`. pg_stat_statements is shared by
    /// every test's database and evicts the least used entries when full: a statement gone since,
    /// or counting again from zero, ran no fewer times than its new count says.
    static func runs(since before: [String: Int], now after: [String: Int]) -> [String: Int] {
        after.reduce(into: [:]) { runs, entry in
            let earlier = before[entry.key] ?? 0
            runs[entry.key] = entry.value >= earlier ? entry.value - earlier : entry.value
        }
    }
}
