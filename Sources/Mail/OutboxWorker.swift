import BookwormCore
import Foundation
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
import ServiceLifecycle

/// How the outbox worker paces itself.
package struct OutboxPolicy: Sendable {
    package var batchSize = 50
    /// How long a claimed row stays this worker's; past it, the row is due again.
    var lease: TimeInterval = 120
    /// Polling fallback when no notification arrives.
    var pollInterval: TimeInterval = 5
    var maxAttempts = 12
    /// First retry delay; each further one doubles (capped at `maxDelay`), with ±25 % jitter.
    /// 12 attempts from 60 s span about a day.
    var baseDelay: TimeInterval = 60
    var maxDelay: TimeInterval = 4 * 3600
    /// Days a failed message keeps its content, for `bookworm outbox retry`; then it is dropped.
    package var failedRetentionDays = 30

    package init() {}

    /// The wait before attempt `attempts + 1`.
    func retryDelay(afterAttempt attempts: Int) -> TimeInterval {
        let exponential = baseDelay * pow(2, Double(max(0, attempts - 1)))
        return min(exponential, maxDelay) * Double.random(in: 0.75...1.25)
    }
}

/// Claims due outbox rows in batches and hands them to a transport. Several workers (in one
/// process or many) share the table safely: `FOR UPDATE SKIP LOCKED` and a lease keep a row
/// with one worker at a time. Wakes on `NOTIFY outbox`, and polls in case one is missed.
package struct OutboxWorker: Service {
    let store: OutboxStore
    package let transport: any MailTransport
    package let policy: OutboxPolicy
    package let logger: Logger
    package let id = UUID()
    package let client: Database

    package let clock: any AppClock

    package init(client: Database, transport: any MailTransport, policy: OutboxPolicy, logger: Logger,
                 clock: any AppClock = SystemClock()) {
        self.client = client
        self.clock = clock
        self.store = OutboxStore(client: client, logger: logger, clock: clock)
        self.transport = transport
        self.policy = policy
        self.logger = logger
    }

    package func run() async throws {
        let wake = WakeSignal(clock: clock)
        let stopping = NIOLockedValueBox(false)
        try await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await listen(wake: wake) }
                await work(wake: wake, stopping: stopping)
                group.cancelAll()
            }
        } onGracefulShutdown: {
            stopping.withLockedValue { $0 = true }
            Task { await wake.signal() }
        }
    }

    private func work(wake: WakeSignal, stopping: NIOLockedValueBox<Bool>) async {
        while !stopping.withLockedValue({ $0 }) && !Task.isCancelled {
            do {
                let handled = try await drainOnce(stopping: { stopping.withLockedValue { $0 } })
                if handled == policy.batchSize { continue }
            } catch {
                logger.error("outbox batch failed", metadata: ["error": .string(String(reflecting: error))])
            }
            await wake.wait(timeout: policy.pollInterval)
        }
    }

    /// One batch: claim, send in order, record each outcome while the next are sent (a crash
    /// mid-batch then repeats at most the messages whose record had not committed; see
    /// `BatchDelivery`). Returns how many rows it claimed.
    @discardableResult
    package func drainOnce(stopping: @Sendable () -> Bool = { false }) async throws -> Int {
        let claimedAt = clock.now()
        let batch = try await store.claim(worker: id, batch: policy.batchSize, lease: policy.lease)
        guard !batch.isEmpty else { return 0 }
        var delivery = BatchDelivery(worker: self, batch: batch, claimedAt: claimedAt)
        do {
            let session = try await transport.openSession()
            do {
                try await delivery.send(over: session, stopping: stopping)
            } catch {
                await session.close()
                throw error
            }
            await session.close()
        } catch {
            try? await store.release(delivery.unfinished, worker: id)
            throw error
        }
        try await store.release(delivery.unfinished, worker: id)
        return batch.count
    }

    /// What becomes of one claimed row, recorded off the sending path.
    enum Step: Sendable {
        /// Its lease was lost to another worker: not sent.
        case skipped
        case suppressed
        case delivered(DeliveryOutcome)
    }

    func record(_ step: Step, for message: ClaimedMessage) async throws {
        switch step {
        case .skipped:
            logger.warning("outbox lease lost; not sending", metadata: ["message_id": .string(message.messageID)])
        case .suppressed:
            try await store.markFailed(message.id, worker: id, error: "recipient suppressed", suppress: nil)
        case .delivered(let outcome):
            try await record(outcome, for: message)
        }
    }

    private func record(_ outcome: DeliveryOutcome, for message: ClaimedMessage) async throws {
        switch outcome {
        case .sent:
            try await store.markSent([message.id], worker: id)
        case .temporaryFailure(let error) where message.attempts >= policy.maxAttempts:
            logger.warning("mail failed after retries", metadata: ["message_id": .string(message.messageID), "error": .string(error)])
            try await store.markFailed(message.id, worker: id, error: error, suppress: nil)
        case .temporaryFailure(let error):
            let delay = policy.retryDelay(afterAttempt: message.attempts)
            logger.info("mail deferred", metadata: ["message_id": .string(message.messageID), "error": .string(error),
                                                    "retry_in_seconds": .stringConvertible(Int(delay))])
            try await store.scheduleRetry(message.id, worker: id, after: delay, error: error)
        case .permanentFailure(let error):
            logger.warning("mail refused; address suppressed", metadata: ["message_id": .string(message.messageID), "error": .string(error)])
            try await store.markFailed(message.id, worker: id, error: error, suppress: message.recipient)
        }
    }

    /// Holds one connection on `LISTEN outbox`; reconnects after a pause if it drops.
    private func listen(wake: WakeSignal) async {
        while !Task.isCancelled {
            do {
                // The raw client: this lease lasts as long as the worker, past any deadline.
                try await client.client.withConnection { connection in
                    let notifications = try await connection.listen("outbox")
                    for try await _ in notifications { await wake.signal() }
                }
            } catch {
                if Task.isCancelled { return }
                logger.debug("outbox listener reconnecting", metadata: ["error": .string("\(error)")])
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }
}
