import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
import Testing
@testable import Portability
@testable import Exchange
@testable import Discovery
@testable import BookwormCore
@testable import Mail
@testable import Accounts
@testable import BookwormApp
@testable import BookwormTestSupport

@Suite struct OutboxAdminTests {
    /// `bookworm outbox …` against the test's database, quietly.
    func admin(_ app: TestApp, _ action: OutboxAction) async throws -> String {
        var config = Config.forTests(app.settings)
        config.logLevel = "critical"
        return try await runOutboxCommand(action, config: config, logger: Logger(label: "t"))
    }

    func messageIDs(_ app: TestApp) async throws -> [UUID] {
        var ids: [UUID] = []
        for try await id in try await app.db.query("SELECT id FROM outbox_messages ORDER BY recipient").decode(UUID.self) { ids.append(id) }
        return ids
    }

    /// Without SMTP_URL the worker inside the app writes `.eml` files under the data folder:
    /// a new user reads the code there, verifies, and contacts another user's copy.
    @Test func withoutSMTPMailLandsInTheMaildirAndTheCodeVerifies() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bookworm-maildir-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await withApp(configure: {
            $0.runWorker = true
            $0.dataDirectory = folder
            $0.mail.outbox.pollInterval = 0.2
        }) { app in
            func mails() -> [String] {
                ((try? FileManager.default.contentsOfDirectory(atPath: folder + "/mail/new")) ?? []).filter { $0.hasSuffix(".eml") }.sorted()
                    .compactMap { try? String(contentsOfFile: folder + "/mail/new/" + $0, encoding: .utf8) }
            }
            func waitFor(_ count: Int) async throws -> [String] {
                _ = try await eventually(within: 60) { mails().count >= count }
                return mails()
            }
            let owner = try await app.register()
            let sender = try await app.register()
            for account in [owner, sender] {
                let file = try #require(try await waitFor(2).first { $0.contains("To: \(account.email)") })
                let code = try #require(ReceivedMail(raw: Data(file.utf8)).body.firstMatch(of: /\b(\d{6})\b/)?.1)
                #expect(try await app.request(.post, "/v1/auth/verify-email", json: ["code": String(code)], token: account.token).status == .noContent)
            }
            let copy = try await app.addCopy(owner.token, title: "Walden")
            let contact = try await app.request(.post, "/v1/contact", json: ["copy_id": copy["id"] as? String ?? "", "message": "Still there?",
                                                                             "share_email": false], token: sender.token)
            #expect(contact.status == .accepted)
            let all = try await waitFor(3)
            #expect(all.contains { $0.contains("To: \(owner.email)") && $0.contains("Walden") })
        }
    }

    @Test func adminCommandsShowRetryAndDiscardMessagesWithoutBodies() async throws {
        try await withApp { app in
            try await app.enqueue(to: ["alice@example.org", "bob@example.org"], subject: "Hi", body: "secret code 123456")
            let stats = try await admin(app, .stats)
            #expect(stats.contains("queued") && stats.contains("2"))
            let list = try await admin(app, .list(status: "queued", limit: 10))
            #expect(list.contains("a***@example.org") && list.contains("b***@example.org"))
            #expect(!list.contains("alice@") && !list.contains("123456"))
            let ids = try await messageIDs(app)
            #expect(try await admin(app, .discard(ids[0])).contains("Discarded"))
            #expect(try await app.outboxStatuses().sorted() == ["failed", "queued"])
            #expect(try await admin(app, .retry(ids[0])).contains("Queued"))
            #expect(try await app.outboxStatuses() == ["queued", "queued"])
            await #expect(throws: AppError.self) { try await admin(app, .discard(UUID())) }
        }
    }

    /// Failed mail keeps its content for `retry` only while it is recent; housekeeping drops
    /// the rest, and a message without content can no longer be retried.
    @Test func longFailedMailLosesItsContentAndCannotBeRetried() async throws {
        try await withApp { app in
            try await app.enqueue(to: ["old@example.org", "recent@example.org"], subject: "Hi", body: "reset link abc")
            let ids = try await messageIDs(app)
            for id in ids { _ = try await admin(app, .discard(id)) }
            try await app.db.query("UPDATE outbox_messages SET updated_at = \(app.clock.now()) - interval '31 days' WHERE id = \(ids[0])")

            // Housekeeping is a recurring leased job, first due ten minutes after the runner
            // made its row.
            try await app.runJobs()
            app.clock.advance(by: 601)
            try await app.runJobs()
            var kept: [String: Bool] = [:]
            for try await (recipient, hasContent) in try await app.db.query("SELECT recipient, content <> '' FROM outbox_messages")
                .decode((String, Bool).self) { kept[recipient] = hasContent }
            #expect(kept == ["old@example.org": false, "recent@example.org": true])
            await #expect(throws: AppError.self) { try await admin(app, .retry(ids[0])) }
            #expect(try await admin(app, .retry(ids[1])).contains("Queued"))
        }
    }

    @Test func stoppingMidBatchHandsTheRestBack() async throws {
        try await withSink { sink in
            try await withApp { app in
                try await app.enqueue(to: (0..<5).map { "reader\($0)@example.org" })
                let sent = NIOLockedCounter(), stop = NIOLockedValueBox(false)
                let smtp = try sink.transport()
                let worker = OutboxWorker(client: app.db, transport: ObservedTransport(inner: smtp, after: {
                    if sent.next() == 2 { stop.withLockedValue { $0 = true } }
                }), policy: .forTests(), logger: Logger(label: "t"), clock: app.clock)
                try await worker.drainOnce(stopping: { stop.withLockedValue { $0 } })
                #expect(sink.messages().count == 2)
                var rows: [(String, Int, Bool)] = []
                for try await row in try await app.db.query("SELECT status, attempts, lease_owner IS NULL FROM outbox_messages ORDER BY status")
                    .decode((String, Int, Bool).self) { rows.append(row) }
                #expect(rows.filter { $0.0 == "sent" }.count == 2)
                // The three it never tried are free again, their attempt not counted.
                #expect(rows.filter { $0.0 == "queued" }.allSatisfy { $0.1 == 0 && $0.2 })
                try await app.deliver(to: sink)
                #expect(sink.messages().count == 5)
            }
        }
    }
}

/// Counts calls across threads.
final class NIOLockedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func next() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }
}
