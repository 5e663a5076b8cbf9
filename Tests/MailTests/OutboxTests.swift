import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Mail
@testable import BookwormTestSupport

extension TestApp {
    /// Queues `count` messages straight through the store, as a business transaction would.
    @discardableResult
    func enqueue(to recipients: [String], subject: String = "Hello", body: String = "Body") async throws -> [String] {
        let outbox = OutboxStore(client: db, logger: Logger(label: "test"), clock: clock)
        let templates = MailTemplates(from: "Bookworm <no-reply@example.org>", publicBaseURL: "http://x", clock: clock)
        var ids: [String] = []
        for recipient in recipients {
            let message = MailMessage(messageID: MailMessage.newMessageID(from: templates.from), from: templates.from, to: recipient,
                                      replyTo: nil, subject: subject, body: body, date: clock.now())
            try await db.transaction(logger: Logger(label: "test")) { connection in
                try await outbox.enqueue(message, kind: .contact, on: connection)
            }
            ids.append(message.messageID)
        }
        return ids
    }
}

@Suite struct OutboxTests {
    @Test func aTemporaryFailureIsRetriedAndSentOnce() async throws {
        try await withSink { sink in
            try await withApp { app in
                let ids = try await app.enqueue(to: ["tempfail-1@example.org", "plain@example.org"])
                let worker = try app.worker(sink)
                try await worker.drainOnce()
                #expect(sink.messages().count == 1)
                var lastError = ""
                for try await error in try await app.db.query("SELECT coalesce(last_error, '') FROM outbox_messages WHERE status = 'queued'").decode(String.self) {
                    lastError = error
                }
                #expect(lastError.hasPrefix("451"))
                try await app.deliver(to: sink)
                let received = sink.messages()
                #expect(received.count == 2)
                #expect(Set(received.compactMap { $0.header("Message-ID") }) == Set(ids))
                #expect(try await app.outboxStatuses() == ["sent", "sent"])
                // Delivered mail keeps no copy of what it said.
                let kept = try await app.db.query("SELECT count(*) FROM outbox_messages WHERE content <> ''").decode(Int.self)
                for try await count in kept { #expect(count == 0) }
            }
        }
    }

    /// A 421 says the server takes no mail now: the message it came with is tried again later
    /// (an attempt counted), the rest of the batch is handed back untried, and the drain stops.
    @Test func a421StopsTheBatchAndHandsTheRestBackUntried() async throws {
        try await withSink { sink in
            try await withApp { app in
                _ = try await app.enqueue(to: ["busy@example.org"])
                app.clock.advance(by: 1)
                _ = try await app.enqueue(to: (0..<3).map { "reader\($0)@example.org" })
                let policy = OutboxPolicy.forTests()
                let worker = try app.worker(sink, policy: policy)
                await #expect(throws: MailServerUnavailable.self) { try await worker.drainOnce() }
                #expect(sink.messages().isEmpty)
                var rows: [String: (attempts: Int, leased: Bool, error: String)] = [:]
                for try await (to, attempts, leased, error) in try await app.db.query("""
                    SELECT recipient, attempts, lease_owner IS NOT NULL, coalesce(last_error, '') FROM outbox_messages
                    """).decode((String, Int, Bool, String).self) { rows[to] = (attempts, leased, error) }
                #expect(rows["busy@example.org"]?.attempts == 1 && rows["busy@example.org"]?.error.hasPrefix("421") == true)
                #expect(rows.filter { $0.key != "busy@example.org" }.values.allSatisfy { $0.attempts == 0 && !$0.leased },
                        "\(rows)")

                // The next drain sends the rest at once; the deferred message waits for its retry.
                try await worker.drainOnce()
                #expect(sink.messages().count == 3)
                app.clock.advance(by: policy.maxDelay)
                try await worker.drainOnce()
                #expect(sink.messages().count == 4)
                #expect(try await app.outboxStatuses().allSatisfy { $0 == "sent" })
            }
        }
    }

    @Test func aWorkerPausesLongerWhileTheServerStaysUnavailable() {
        var policy = OutboxPolicy()
        policy.pollInterval = 5
        var pauses: [TimeInterval] = []
        var pause: TimeInterval?
        for _ in 0..<9 {
            pause = policy.serverPause(after: pause)
            pauses.append(pause ?? 0)
        }
        #expect(pauses == [5, 10, 20, 40, 80, 160, 300, 300, 300])
    }

    @Test func aPermanentRefusalFailsTheMessageAndSuppressesTheAddress() async throws {
        try await withSink { sink in
            try await withApp { app in
                try await app.enqueue(to: ["reject-me@example.org"])
                try await app.deliver(to: sink)
                #expect(try await app.outboxStatuses() == ["failed"])
                var suppressed: [String] = []
                for try await address in try await app.db.query("SELECT address FROM mail_suppressions").decode(String.self) { suppressed.append(address) }
                #expect(suppressed == ["reject-me@example.org"])
                // Later mail to it is failed without being sent.
                try await app.enqueue(to: ["Reject-Me@example.org"])
                try await app.deliver(to: sink)
                #expect(try await app.outboxStatuses() == ["failed", "failed"])
                #expect(sink.messages().isEmpty)
            }
        }
    }

    @Test func retriesStopAtTheMaximumAttempts() async throws {
        try await withApp { app in
            try await app.enqueue(to: ["someone@example.org"])
            // Nothing listens on this port: a network error each time.
            let transport = SMTPTransport(settings: try SMTPSettings(url: "smtp://127.0.0.1:9?tls=none", timeoutSeconds: 2))
            let policy = OutboxPolicy.forTests(maxAttempts: 3)
            let worker = OutboxWorker(client: app.db, transport: transport, policy: policy, logger: Logger(label: "t"), clock: app.clock)
            for _ in 0..<30 where try await app.queuedCount() > 0 {
                await #expect(throws: MailServerUnavailable.self) { try await worker.drainOnce() }
                app.clock.advance(by: policy.maxDelay)
            }
            #expect(try await app.outboxStatuses() == ["failed"])
            for try await attempts in try await app.db.query("SELECT attempts FROM outbox_messages").decode(Int.self) {
                #expect(attempts == 3)
            }
        }
    }

    @Test func aRolledBackTransactionLeavesNoMessage() async throws {
        try await withApp { app in
            // A registration that fails (taken username) writes its code mail in the same transaction.
            let first = try await app.register()
            let clash = try await app.request(.post, "/v1/auth/register",
                                              json: ["email": "other@example.org", "username": first.username, "password": "long enough password"])
            #expect(clash.status == .conflict)
            struct Abort: Error {}
            await #expect(throws: Abort.self) {
                try await app.db.transaction(logger: Logger(label: "t")) { connection in
                    let outbox = OutboxStore(client: app.db, logger: Logger(label: "t"), clock: app.clock)
                    let message = MailMessage(messageID: "<x@example.org>", from: "a@example.org", to: "b@example.org", replyTo: nil,
                                              subject: "s", body: "b", date: Date())
                    try await outbox.enqueue(message, kind: .contact, on: connection)
                    throw Abort()
                }
            }
            #expect(try await app.outboxStatuses() == ["queued"])
        }
    }

    @Test func twoWorkersNeverSendTheSameRow() async throws {
        try await withSink { sink in
            try await withApp { app in
                let ids = try await app.enqueue(to: (0..<60).map { "reader\($0)@example.org" })
                var policy = OutboxPolicy.forTests()
                policy.batchSize = 7
                // The first worker holds its claimed batch until the second has claimed another
                // and sent from it: both hold claims at the same moment, so SKIP LOCKED and the
                // lease are what keep them apart, not luck in scheduling.
                let arrived = SendGate(), released = SendGate()
                let sent = NIOLockedValueBox((first: 0, second: 0))
                let smtp = try sink.transport()
                let first = OutboxWorker(
                    client: app.db,
                    transport: ObservedTransport(inner: smtp, before: { arrived.open(); released.waitBlocking() },
                                                 after: { sent.withLockedValue { $0.first += 1 } }),
                    policy: policy, logger: Logger(label: "first"), clock: app.clock)
                let second = OutboxWorker(
                    client: app.db,
                    transport: ObservedTransport(inner: smtp, before: { arrived.waitBlocking() },
                                                 after: { released.open(); sent.withLockedValue { $0.second += 1 } }),
                    policy: policy, logger: Logger(label: "second"), clock: app.clock)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for worker in [first, second] {
                        group.addTask { while try await worker.drainOnce() > 0 {} }
                    }
                    try await group.waitForAll()
                }
                let received = sink.messages().compactMap { $0.header("Message-ID") }
                #expect(received.count == 60)
                #expect(Set(received) == Set(ids))
                #expect(try await app.outboxStatuses().allSatisfy { $0 == "sent" })
                #expect(sent.withLockedValue { $0.first > 0 && $0.second > 0 })
            }
        }
    }

    /// A worker held up past its lease (here: its first send blocks while the clock moves on)
    /// loses the rest of its batch to another worker and sends none of it: only the message that
    /// was already in flight can arrive twice.
    @Test func aWorkerThatLostItsLeaseSkipsTheRowsAnotherTook() async throws {
        try await withSink { sink in
            try await withApp { app in
                let ids = try await app.enqueue(to: (0..<5).map { "reader\($0)@example.org" })
                let policy = OutboxPolicy.forTests(lease: 30)
                let arrived = SendGate(), released = SendGate()
                let smtp = try sink.transport()
                let slow = OutboxWorker(client: app.db, transport: ObservedTransport(inner: smtp, before: {
                    arrived.open()
                    released.waitBlocking()
                }, after: {}), policy: policy, logger: Logger(label: "slow"), clock: app.clock)
                let held = Task { try await slow.drainOnce() }
                await arrived.wait()
                app.clock.advance(by: 60)
                let other = try app.worker(sink, policy: policy)
                while try await other.drainOnce() > 0 {}
                released.open()
                _ = try await held.value
                let received = sink.messages().compactMap { $0.header("Message-ID") }
                #expect(Set(received) == Set(ids))
                // 5 from the other worker, plus at most the one the slow worker had in flight.
                #expect(received.count <= ids.count + 1, "sent \(received.count) for \(ids.count)")
                #expect(try await app.outboxStatuses().allSatisfy { $0 == "sent" })
            }
        }
    }

    /// A crash mid-batch may repeat only the messages whose record had not committed: records
    /// are written while the next messages are sent, and trail them by at most
    /// `BatchDelivery.maxUnrecorded` + 1, never left to the end of the batch.
    @Test func messagesAreMarkedSentWhileTheBatchIsStillBeingSent() async throws {
        try await withSink { sink in
            try await withApp { app in
                try await app.enqueue(to: (0..<50).map { "reader\($0)@example.org" })
                let seen = NIOLockedValueBox<[Int]>([])
                let transport = ObservedTransport(inner: try sink.transport(),
                                                  before: {
                                                      let sent = blocking { (try? await app.outboxStatuses().filter { $0 == "sent" }.count) ?? -1 }
                                                      seen.withLockedValue { $0.append(sent) }
                                                  })
                let worker = OutboxWorker(client: app.db, transport: transport, policy: .forTests(), logger: Logger(label: "t"),
                                          clock: app.clock)
                #expect(try await worker.drainOnce() == 50)
                let counts = seen.withLockedValue { $0 }
                #expect(counts.count == 50)
                for (index, count) in counts.enumerated() {
                    #expect(count >= index - BatchDelivery.maxUnrecorded - 1 && count <= index, "\(counts)")
                }
                #expect(try await app.outboxStatuses().allSatisfy { $0 == "sent" })
                #expect(sink.messages().count == 50)
            }
        }
    }

    @Test func anExpiredLeaseMakesTheRowDueAgain() async throws {
        try await withApp { app in
            try await app.enqueue(to: ["late@example.org"])
            let store = OutboxStore(client: app.db, logger: Logger(label: "t"), clock: app.clock)
            let crashed = UUID()
            #expect(try await store.claim(worker: crashed, batch: 10, lease: 30).count == 1)
            app.clock.advance(by: 29)
            #expect(try await store.claim(worker: UUID(), batch: 10, lease: 30).isEmpty)
            app.clock.advance(by: 2)
            let again = try await store.claim(worker: UUID(), batch: 10, lease: 30)
            #expect(again.count == 1)
            #expect(again.first?.attempts == 2)
            // The crashed worker's late completion does not count.
            for message in again { try await store.markSent([message.id], worker: crashed) }
            #expect(try await app.outboxStatuses() == ["queued"])
        }
    }
}

/// Holds whoever waits on it until it is opened (once, for good).
final class SendGate: Sendable {
    private let state = NIOLockedValueBox<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func open() {
        let waiters = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLockedValue { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// For a sender's thread, which may block.
    func waitBlocking() {
        blocking { await self.wait() }
    }
}

/// Runs `body` to its end from a thread that may block (a batch's sender), not from a task.
func blocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let done = DispatchSemaphore(value: 0)
    let result = NIOLockedValueBox<T?>(nil)
    Task {
        let value = await body()
        result.withLockedValue { $0 = value }
        done.signal()
    }
    done.wait()
    return result.withLockedValue { $0 }!
}

/// A transport that runs `before` ahead of each send and `after` once it is done, on the
/// batch's sending thread.
struct ObservedTransport: MailTransport {
    let inner: any MailTransport
    var before: @Sendable () -> Void = {}
    var after: @Sendable () -> Void = {}

    func openSession() throws -> any MailSession {
        Session(inner: try inner.openSession(), before: before, after: after)
    }

    struct Session: MailSession {
        let inner: any MailSession
        let before: @Sendable () -> Void
        let after: @Sendable () -> Void

        func send(_ message: OutgoingMessage) -> DeliveryOutcome {
            before()
            let outcome = inner.send(message)
            after()
            return outcome
        }

        func close() { inner.close() }
    }
}
