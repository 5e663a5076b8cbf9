import Foundation
import Logging
import PostgresNIO
@testable import BookwormCore
@testable import Mail
@testable import Accounts
@testable import Places
@testable import Catalog
@testable import Discovery
@testable import Exchange
@testable import BookwormApp

/// Runs `body` with a fresh SMTP sink, stopping it afterwards whatever happens.
func withSink<T: Sendable>(_ body: @Sendable (SMTPSink) async throws -> T) async throws -> T {
    let sink = try await SMTPSink.start()
    do {
        let result = try await body(sink)
        sink.stop()
        return result
    } catch {
        sink.stop()
        throw error
    }
}

extension OutboxPolicy {
    /// Retries in milliseconds rather than minutes.
    static func forTests(maxAttempts: Int = 12, lease: TimeInterval = 30) -> OutboxPolicy {
        var policy = OutboxPolicy()
        policy.baseDelay = 0.05
        policy.maxDelay = 0.2
        policy.maxAttempts = maxAttempts
        policy.lease = lease
        policy.pollInterval = 0.2
        return policy
    }
}

extension TestApp {
    /// A worker on this test's database sending to `sink`.
    func worker(_ sink: SMTPSink, policy: OutboxPolicy = .forTests()) throws -> OutboxWorker {
        let transport = try sink.transport()
        return OutboxWorker(client: db, transport: transport, policy: policy, logger: Logger(label: "test-worker"), clock: clock)
    }

    /// Drains the outbox to `sink` until nothing is due (retries included, up to `rounds`).
    func deliver(to sink: SMTPSink, rounds: Int = 40) async throws {
        let worker = try worker(sink)
        for _ in 0..<rounds {
            try await worker.drainOnce()
            if try await queuedCount() == 0 { return }
            // Past any backoff the last round scheduled (at most `maxDelay`).
            clock.advance(by: worker.policy.maxDelay)
        }
    }

    func queuedCount() async throws -> Int {
        for try await count in try await db.query("SELECT count(*)::int8 FROM outbox_messages WHERE status = 'queued'").decode(Int.self) {
            return count
        }
        return 0
    }

    func outboxStatuses() async throws -> [String] {
        var statuses: [String] = []
        for try await status in try await db.query("SELECT status FROM outbox_messages ORDER BY created_at").decode(String.self) {
            statuses.append(status)
        }
        return statuses
    }

    /// Registers and verifies through the real mail: the code is read from the delivered message.
    func registerVerified(_ sink: SMTPSink, username: String? = nil) async throws -> Account {
        let account = try await register(username: username)
        try await deliver(to: sink)
        guard let mail = sink.messages().last(where: { $0.envelopeTo == account.email }),
              let code = mail.body.firstMatch(of: /\b(\d{6})\b/)?.1 else {
            throw TestFailure("no code mail for \(account.email)")
        }
        let response = try await request(.post, "/v1/auth/verify-email", json: ["code": String(code)], token: account.token)
        guard response.status == .noContent else { throw TestFailure("verify: \(response.status) \(String(buffer: response.body))") }
        return account
    }
}
