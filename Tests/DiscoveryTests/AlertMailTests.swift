import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import Accounts
@testable import BookwormCore
@testable import Discovery
@testable import BookwormTestSupport

/// How alerts are mailed: instant, a daily digest, or not at all; and the fan-out in batches.
@Suite struct AlertMailTests {
    @Test func aDailyDigestGoesOutOnceADayListingEveryNewAlert() async throws {
        try await withApp { app in
            let wisher = try await app.wisher(alerts: "daily")
            let first = try await app.wisher(at: 52.53, 13.41), second = try await app.wisher(at: 52.51, 13.39)
            let dune = try await app.book(first.token, title: "Dune", authors: ["Frank Herbert"])
            let emma = try await app.book(second.token, title: "Emma", authors: ["Jane Austen"])
            let ulysses = try await app.book(second.token, title: "Ulysses", authors: ["James Joyce"])
            try await app.runJobs()
            for book in [dune, emma, ulysses] { #expect(try await app.wish(wisher.token, book: book).status == .created) }

            _ = try await app.offer(first.token, title: "Dune", authors: ["Frank Herbert"])
            _ = try await app.offer(second.token, title: "Emma", authors: ["Jane Austen"])
            try await app.runJobs()
            #expect(try await app.alertRows(wisher.id) == 2)
            #expect(try await app.alertMails().isEmpty)

            // The digest hour: one mail listing both.
            let digest = WishPolicy().nextDigest(after: app.clock.now())
            app.clock.advance(by: digest.timeIntervalSince(app.clock.now()) + 60)
            try await app.runJobs()
            var mails = try await app.alertMails()
            #expect(mails.count == 1)
            #expect(mails.first?.to == wisher.email)
            #expect(mails.first?.content.contains("Dune") == true && mails.first?.content.contains("Emma") == true)

            // An alert an hour later waits for tomorrow's digest, which lists only it.
            app.clock.advance(by: 3600)
            _ = try await app.offer(second.token, title: "Ulysses", authors: ["James Joyce"])
            try await app.runJobs()
            app.clock.advance(by: 3600 * 20)
            try await app.runJobs()
            #expect(try await app.alertMails().count == 1)
            app.clock.advance(by: 3600 * 3)
            try await app.runJobs()
            mails = try await app.alertMails()
            #expect(mails.count == 2)
            #expect(mails.last?.content.contains("Ulysses") == true && mails.last?.content.contains("Dune") == false)
        }
    }

    @Test func offMeansNoMailButTheAlertsStillList() async throws {
        try await withApp { app in
            let quiet = try await app.wisher(alerts: "off"), eager = try await app.wisher(alerts: "instant")
            let owner = try await app.wisher(at: 52.53, 13.41)
            let book = try await app.book(owner.token, title: "Middlemarch", authors: ["George Eliot"])
            try await app.runJobs()
            #expect(try await app.wish(quiet.token, book: book).status == .created)
            #expect(try await app.wish(eager.token, book: book).status == .created)
            try await app.runJobs()
            _ = try await app.offer(owner.token, title: "Middlemarch", authors: ["George Eliot"])
            _ = try await app.offer(owner.token, title: "Middlemarch", authors: ["George Eliot"], condition: "fair")
            try await app.runJobs()
            app.clock.advance(by: 2 * 86400)
            try await app.runJobs()
            #expect(try await app.alerts(quiet.token).count == 2)
            let mails = try await app.alertMails()
            // One fan-out per copy, so one instant mail per copy.
            #expect(mails.map(\.to) == [eager.email, eager.email])
            #expect(!mails.contains { $0.to == quiet.email })
        }
    }

    /// Listing copy after copy of a wished book is a way to mail the wisher: the owner's daily
    /// budget for them bounds it (shared with trades and contact). Every alert is still written.
    @Test func anOwnerListingCopyAfterCopyMailsAnInstantWisherAtMostTheBudget() async throws {
        let budget = NotifyPolicy(perRecipientPerDay: 3, perSenderPerHour: 30)
        try await withApp { app in
            let eager = try await app.wisher(alerts: "instant")
            let owner = try await app.wisher(at: 52.53, 13.41)
            let book = try await app.book(owner.token, title: "Solaris", authors: ["Stanislaw Lem"])
            try await app.runJobs()
            #expect(try await app.wish(eager.token, book: book).status == .created)
            try await app.runJobs()
            for _ in 0..<5 {
                _ = try await app.offer(owner.token, title: "Solaris", authors: ["Stanislaw Lem"])
                try await app.runJobs(notify: budget)
            }
            #expect(try await app.alertRows(eager.id) == 5)
            #expect(try await app.alertMails().map(\.to) == Array(repeating: eager.email, count: 3))
            // A day later the budget is whole again.
            app.clock.advance(by: 86400 + 60)
            _ = try await app.offer(owner.token, title: "Solaris", authors: ["Stanislaw Lem"])
            try await app.runJobs(notify: budget)
            #expect(try await app.alertMails().count == 4)
        }
    }

    @Test func aBookWishedByManyIsFannedOutInBatchesWithoutTheOwnerWaiting() async throws {
        try await withApp { app in
            let owner = try await app.wisher(at: 52.52, 13.405)
            let book = try await app.book(owner.token, title: "Popular", authors: ["Writer"])
            try await app.runJobs()
            // 250 wishers around Berlin, straight into the tables; 10 of them too far for their radius.
            try await app.db.query("""
                WITH u AS (
                    INSERT INTO users (email, email_normalized, username, password_hash, email_verified_at, alerts)
                    SELECT 'fan' || i || '@example.org', 'fan' || i || '@example.org', 'fan_' || i, 'x', now(), 'instant'
                    FROM generate_series(1, 250) i
                    RETURNING id, username
                ), p AS (
                    INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude, is_default)
                    SELECT id, 'Home', 'home', 52.5, 13.4, 52.5, 13.4, true FROM u
                    RETURNING owner_id
                )
                INSERT INTO wishes (user_id, book_id, work_key, radius_km, created_at)
                SELECT u.id, b.id, b.work_key, CASE WHEN substr(u.username, 5)::int <= 10 THEN 1 ELSE 25 END, now()
                FROM u JOIN books b ON b.id = \(UUID(uuidString: book))
                """)
            let listed = try await app.request(.post, "/v1/me/copies", json: ["title": "Popular", "authors": ["Writer"], "condition": "good"],
                                               token: owner.token)
            #expect(listed.status == .created)
            // The owner's request only queued the fan-out: no alert exists until a worker runs it.
            let count = "SELECT count(*)::int8 FROM alerts"
            for try await rows in try await app.db.query(PostgresQuery(unsafeSQL: count)).decode(Int64.self) { #expect(rows == 0) }

            try await app.runJobs(wishes: WishPolicy(fanOutBatch: 7))
            for try await rows in try await app.db.query(PostgresQuery(unsafeSQL: count)).decode(Int64.self) { #expect(rows == 240) }
            #expect(try await app.alertMails().count == 240)
            #expect(Set(try await app.alertMails().map(\.to)).count == 240)
        }
    }
}
