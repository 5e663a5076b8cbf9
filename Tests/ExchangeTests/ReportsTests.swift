import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Exchange
@testable import BookwormTestSupport

fileprivate extension TestApp {
    /// Reporters whose reports count toward hiding: verified, and (after the clock moves past
    /// the default 72 hours) with accounts old enough. Each should report from `address(index)`.
    func trustedReporters(_ count: Int) async throws -> [Account] {
        var reporters: [Account] = []
        for _ in 0..<count { reporters.append(try await registerTrader()) }
        clock.advance(by: 73 * 3600)
        return reporters
    }

    func isHidden(_ copy: String) async throws -> Bool {
        for try await hidden in try await db.query("SELECT hidden_at IS NOT NULL FROM copies WHERE id = \(UUID(uuidString: copy))")
            .decode(Bool.self) { return hidden }
        throw TestFailure("no copy \(copy)")
    }
}

/// A client address of reporter `index`'s own.
fileprivate func address(_ index: Int) -> String { "203.0.113.\(index + 1)" }

@Suite struct ReportsTests {
    @Test func aPostReportedByThreeDifferentPeopleIsHiddenUntilAnAdminDecides() async throws {
        try await withApp { app in
            let author = try await app.register()
            let reporters = try await app.trustedReporters(3)
            try await app.addPin(author.token, kind: "meetup")
            let post = try #require(try await app.addPost(author.token, body: "Cheap pills, click here")["id"] as? String)

            for (index, reporter) in reporters.enumerated() {
                #expect(try await app.feedIDs("/v1/posts", token: reporter.token).contains(post))
                let filed = try await app.report(reporter.token, "post", id: post, reason: "spam", details: "an advert", from: address(index))
                #expect(filed.status == .created)
                let again = try await app.report(reporter.token, "post", id: post, reason: "abuse")
                #expect(index == 2 ? again.status == .notFound : again.status == .conflict, "report \(index)")
            }
            for reporter in reporters {
                #expect(try await !app.feedIDs("/v1/posts", token: reporter.token).contains(post))
                #expect(try await app.request(.get, "/v1/posts/\(post)", token: reporter.token).status == .notFound)
            }
            #expect(try await !app.feedIDs("/v1/posts").contains(post))
            #expect(try await !app.feedIDs("/v1/posts?latitude=52.52&longitude=13.405", token: reporters[0].token).contains(post))
            // Its author still has it, in the nearby feed too.
            #expect(try await app.request(.get, "/v1/posts/\(post)", token: author.token).status == .ok)
            #expect(try await app.feedIDs("/v1/posts?latitude=52.52&longitude=13.405", token: author.token).contains(post))

            let list = try await app.bookworm(["reports", "list"])
            #expect(list.status == 0, "\(list.output)")
            #expect(list.output.contains("post \(post)") && list.output.contains(author.username))
            let id = try #require(try await app.db.query("SELECT id FROM reports ORDER BY created_at LIMIT 1").decode(UUID.self).first { _ in true })
            let shown = try await app.bookworm(["reports", "show", id.apiString])
            #expect(shown.output.contains("an advert") && shown.output.contains("3 open"), "\(shown.output)")
            let dismissed = try await app.bookworm(["reports", "resolve", id.apiString, "--action", "dismiss", "--reason", "satire, not spam"])
            #expect(dismissed.status == 0 && dismissed.output.contains("3 open report(s)"), "\(dismissed.output)")
            #expect(try await app.feedIDs("/v1/posts", token: reporters[0].token).contains(post))
            let twice = try await app.bookworm(["reports", "resolve", id.apiString, "--action", "remove"])
            #expect(twice.status == 1 && twice.output.contains("already dismissed"), "\(twice.output)")
        }
    }

    @Test func aRemovedCopyStaysHiddenFromEveryoneButItsOwner() async throws {
        try await withApp(configure: { $0.reports.hideThreshold = 1 }) { app in
            let owner = try await app.registerTrader()
            let reporter = try #require(try await app.trustedReporters(1).first)
            let copy = try #require(try await app.addCopy(owner.token, title: "Stolen goods")["id"] as? String)
            #expect(try await app.report(reporter.token, "copy", id: copy, reason: "fraud").status == .created)
            #expect(try await app.request(.get, "/v1/copies/\(copy)", token: reporter.token).status == .notFound)
            #expect(try await app.request(.get, "/v1/copies/\(copy)").status == .notFound)
            #expect(try await !app.page("/v1/copies").ids.contains(copy))
            let trade = try await app.request(.post, "/v1/trades", json: ["copy_id": copy, "kind": "gift"], token: reporter.token)
            #expect(trade.status == .notFound, "\(String(buffer: trade.body))")
            #expect(try await app.request(.get, "/v1/copies/\(copy)", token: owner.token).status == .ok)

            let report = try #require(try await app.db.query("SELECT id FROM reports").decode(UUID.self).first { _ in true })
            let removed = try await app.bookworm(["reports", "resolve", report.apiString, "--action", "remove", "--reason", "stolen"])
            #expect(removed.status == 0, "\(removed.output)")
            #expect(try await app.request(.get, "/v1/copies/\(copy)", token: reporter.token).status == .notFound)
            let open = try await app.bookworm(["reports", "list"])
            #expect(open.output.contains("no open reports"), "\(open.output)")
            let all = try await app.bookworm(["reports", "list", "--status", "all"])
            #expect(all.output.contains("removed"), "\(all.output)")
        }
    }

    @Test func aReportNamesWhatIsWrongWithIt() async throws {
        try await withApp { app in
            let alice = try await app.register()
            let bob = try await app.register()
            let copy = try #require(try await app.addCopy(bob.token)["id"] as? String)
            let badReason = try await app.report(alice.token, "copy", id: copy, reason: "ugly")
            #expect(try badReason.status == .badRequest && (badReason.problemFields()) == ["reason"])
            let badTarget = try await app.report(alice.token, "shelf", id: copy)
            #expect(try badTarget.status == .badRequest && (badTarget.problemFields()) == ["target"])
            let long = try await app.report(alice.token, "copy", id: copy, details: String(repeating: "x", count: 1001))
            #expect(try long.status == .badRequest && (long.problemFields()) == ["details"])
            let mixed = try await app.report(alice.token, "user", id: copy)
            #expect(try mixed.status == .unprocessableContent && (mixed.problemFields()) == ["username"])
            #expect(try await app.report(alice.token, "copy", username: bob.username).status == .unprocessableContent)
            #expect(try await app.report(alice.token, "copy", id: UUID().uuidString).status == .notFound)
            #expect(try await app.report(alice.token, "user", username: "nobody_here").status == .notFound)
            let own = try await app.report(bob.token, "copy", id: copy)
            #expect(try own.status == .unprocessableContent && (own.problemFields()) == ["target"])
            #expect(try await app.report(alice.token, "user", username: bob.username, reason: "abuse").status == .created)
            #expect(try await app.report(alice.token, "user", username: bob.username, reason: "fraud").status == .conflict)
            #expect(try await app.request(.post, "/v1/reports", json: ["target": "user", "username": bob.username, "reason": "spam"]).status
                    == .unauthorized)
        }
    }

    /// Three reports at once: each counts the reporters under the copy's row lock, so the last
    /// to commit always sees the other two. Without the lock two can each count two, and the
    /// copy stays up.
    @Test func threeSimultaneousReportsAlwaysHideTheCopy() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let reporters = try await app.trustedReporters(3)
            for round in 0..<8 {
                let copy = try #require(try await app.addCopy(owner.token, title: "Round \(round)")["id"] as? String)
                let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                    for (index, reporter) in reporters.enumerated() {
                        group.addTask { try await app.report(reporter.token, "copy", id: copy, reason: "spam", from: address(index)).status }
                    }
                    return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
                }
                #expect(statuses == [.created, .created, .created])
                let hidden = try await app.db.query("SELECT hidden_at IS NOT NULL FROM copies WHERE id = \(UUID(uuidString: copy))")
                    .decode(Bool.self).first { _ in true }
                #expect(hidden == true, "round \(round)")
            }
        }
    }

    /// Fresh or unverified accounts are cheap: their reports reach the queue but hide nothing.
    @Test func unverifiedOrDayOldReportersHideNothingButTheirReportsReachTheQueue() async throws {
        try await withApp { app in
            let owner = try await app.registerTrader()
            let verified = [try await app.registerTrader(), try await app.registerTrader(), try await app.registerTrader()]
            let unverified = [try await app.register(), try await app.register(), try await app.register()]
            let dayOldTarget = try await app.copyID(owner.token, title: "Reported by day-old accounts")
            let unverifiedTarget = try await app.copyID(owner.token, title: "Reported by unverified accounts")
            app.clock.advance(by: 24 * 3600)
            for (index, reporter) in verified.enumerated() {
                #expect(try await app.report(reporter.token, "copy", id: dayOldTarget, from: address(index)).status == .created)
            }
            #expect(try await !app.isHidden(dayOldTarget))
            app.clock.advance(by: 49 * 3600)
            for (index, reporter) in unverified.enumerated() {
                #expect(try await app.report(reporter.token, "copy", id: unverifiedTarget, from: address(index)).status == .created)
            }
            #expect(try await !app.isHidden(unverifiedTarget))
            #expect(try await app.request(.get, "/v1/copies/\(unverifiedTarget)").status == .ok)

            let open = try await app.db.query("SELECT count(*)::int8 FROM reports WHERE status = 'open'").decode(Int.self)
            for try await count in open { #expect(count == 6) }
            let list = try await app.bookworm(["reports", "list"])
            #expect(list.output.contains("copy \(dayOldTarget)") && list.output.contains("copy \(unverifiedTarget)"), "\(list.output)")

            // The same verified people, now 73 hours old, count.
            let later = try await app.copyID(owner.token, title: "Reported by trusted accounts")
            for (index, reporter) in verified.enumerated() {
                #expect(try await app.report(reporter.token, "copy", id: later, from: address(index)).status == .created)
            }
            #expect(try await app.isHidden(later))
        }
    }

    @Test func trustedReportersSharingAClientAddressCountOnce() async throws {
        try await withApp { app in
            let owner = try await app.registerTrader()
            let reporters = try await app.trustedReporters(5)
            let copy = try await app.copyID(owner.token, title: "Reported from one household")
            for reporter in reporters.prefix(3) {
                #expect(try await app.report(reporter.token, "copy", id: copy, from: "192.0.2.77").status == .created)
            }
            #expect(try await !app.isHidden(copy))
            #expect(try await app.report(reporters[3].token, "copy", id: copy, from: address(1)).status == .created)
            #expect(try await !app.isHidden(copy))
            // A third different address makes three.
            #expect(try await app.report(reporters[4].token, "copy", id: copy, from: address(2)).status == .created)
            #expect(try await app.isHidden(copy))
        }
    }
}
