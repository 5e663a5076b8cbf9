import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Mail
@testable import BookwormTestSupport

@Suite struct WorkerProcessTests {
    /// A `bookworm worker` on this test's database and sink: 5 s lease, polling every second.
    static func workerEnvironment(_ app: TestApp, _ sink: SMTPSink, batch: Int) -> [String: String] {
        bookwormEnvironment([
            "DATABASE_URL": app.settings.connectionURL, "SMTP_URL": sink.url, "BOOKWORM_MAIL_BATCH": String(batch),
            "BOOKWORM_MAIL_LEASE_SECONDS": "5", "BOOKWORM_MAIL_POLL_SECONDS": "1",
        ])
    }

    /// A `bookworm worker` process killed with SIGKILL mid-batch: its leased rows come back
    /// when the lease ends, and every message arrives at least once, always under its one
    /// Message-ID, and ends `sent`.
    @Test func aWorkerKilledMidBatchLosesNothing() async throws {
        try await withSink { sink in
            try await withApp { app in
                let ids = try await app.enqueue(to: (0..<40).map { "slow\($0)@example.org" })
                let environment = Self.workerEnvironment(app, sink, batch: 6)
                let pid = try ChildProcess.spawn(try bookwormBinary(), ["worker"], environment: environment)
                try await sink.waitForMessages(3)
                kill(pid, SIGKILL)
                ChildProcess.wait(pid)
                #expect(try await app.queuedCount() > 0)

                // A new worker picks up the rest, including the dead worker's rows once their lease ends.
                let worker = try app.worker(sink)
                while try await worker.drainOnce() > 0 {}
                // The dead worker's rows are leased for 5 s of real time; this worker's clock moves
                // past that at once. It started with the app, and on a loaded machine the kill can
                // come more than a minute of real time later (seen: 2 of 40 rows still leased).
                app.clock.advance(by: 600)
                while try await worker.drainOnce() > 0 {}
                let received = sink.messages().compactMap { $0.header("Message-ID") }
                #expect(Set(received) == Set(ids))
                #expect(received.count >= ids.count)
                #expect(try await app.outboxStatuses() == Array(repeating: "sent", count: ids.count))
            }
        }
    }

    /// Two healthy `bookworm worker` processes, a 5 s lease and a server taking 150 ms a message:
    /// a batch of 50 outlasts its lease, yet every address gets its message exactly once (each
    /// worker renews its claim as it goes and skips a row it no longer holds).
    @Test func twoHealthyWorkersNeverSendAMessageTwice() async throws {
        try await withSink { sink in
            try await withApp { app in
                let ids = try await app.enqueue(to: (0..<100).map { "pace\($0)@example.org" })
                let environment = Self.workerEnvironment(app, sink, batch: 50)
                let workers = try (0..<2).map { _ in try ChildProcess.spawn(try bookwormBinary(), ["worker"], environment: environment) }
                let allSent = try await eventually(within: 90, interval: .milliseconds(200)) {
                    try await app.outboxStatuses().allSatisfy { $0 == "sent" }
                }
                // A graceful stop lets a worker finish the message in hand, so anything still in
                // flight is counted below.
                for pid in workers { kill(pid, allSent ? SIGTERM : SIGKILL); _ = ChildProcess.wait(pid) }
                #expect(allSent)
                let received = sink.messages().compactMap { $0.header("Message-ID") }
                #expect(Set(received) == Set(ids))
                #expect(received.count == ids.count, "duplicates sent: \(received.count - ids.count)")
            }
        }
    }

    /// With the worker inside the app and polling only every minute, a new message still goes
    /// out at once: the insert's NOTIFY wakes it.
    @Test func theWorkerInsideServeWakesOnNotify() async throws {
        try await withSink { sink in
            let url = sink.url
            try await withApp(configure: {
                $0.runWorker = true
                $0.mail.smtpURL = url
                $0.mail.outbox.pollInterval = 60
            }) { app in
                // Once the worker waits on its (never advanced) poll timer beside housekeeping's,
                // only a notification can wake it.
                #expect(try await eventually(within: 60) { app.clock.sleeperCount >= 2 })
                let account = try await app.register()
                // The poll timer never fires, so however long this takes, only the NOTIFY can
                // have sent it; a loaded machine once took just over 10 s.
                let mail = try await sink.waitForMessages(1, timeout: 30)
                #expect(mail.first?.envelopeTo == account.email)
            }
        }
    }

    /// A message committed while the worker's `LISTEN` connection is down (a reconnect) goes
    /// out once it listens again, not at the next poll: here the poll timer never fires.
    @Test func aMessageQueuedWhileTheListenerIsDownGoesOutWhenItListensAgain() async throws {
        try await withSink { sink in
            let url = sink.url
            try await withApp(configure: {
                $0.runWorker = true
                $0.mail.smtpURL = url
                $0.mail.outbox.pollInterval = 3600
            }) { app in
                let listener = "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN \"outbox\";'"
                #expect(try await eventually(within: 60) { try await app.db.query(PostgresQuery(unsafeSQL: listener)).rows.count == 1 })
                let outbox = OutboxStore(client: app.db, logger: Logger(label: "test"), clock: app.clock)
                let from = "Bookworm <no-reply@example.org>"
                let message = MailMessage(messageID: MailMessage.newMessageID(from: from), from: from, to: "reader@example.org",
                                          replyTo: nil, subject: "Hello", body: "Body", date: app.clock.now())
                // The listener's connection ends inside the transaction that queues the message,
                // so the message's NOTIFY, sent at commit, reaches no one.
                try await app.db.transaction(logger: Logger(label: "test")) { connection in
                    let ended = try await connection.query(PostgresQuery(unsafeSQL: "SELECT pg_terminate_backend(pid) FROM (\(listener)) listener"),
                                                           logger: Logger(label: "test")).collect()
                    #expect(ended.count == 1)
                    try await outbox.enqueue(message, kind: .contact, on: connection)
                }
                let mail = try await sink.waitForMessages(1, timeout: 60)
                #expect(mail.first?.header("Message-ID") == message.messageID)
            }
        }
    }
}
