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
        [
            "DATABASE_URL": app.settings.connectionURL, "SMTP_URL": sink.url, "BOOKWORM_MAIL_BATCH": String(batch),
            "BOOKWORM_MAIL_LEASE_SECONDS": "5", "BOOKWORM_MAIL_POLL_SECONDS": "1", "LOG_LEVEL": "error",
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
        ]
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
}
