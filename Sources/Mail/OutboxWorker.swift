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
    /// How long one SMTP connection serves batch after batch before a fresh one is opened.
    var sessionReuse: TimeInterval = 300
    /// First retry delay; each further one doubles (capped at `maxDelay`), with ±25 % jitter.
    /// 12 attempts from 60 s span about a day.
    var baseDelay: TimeInterval = 60
    var maxDelay: TimeInterval = 4 * 3600
    /// Days a failed message keeps its content, for `bookworm outbox retry`; then it is dropped.
    package var failedRetentionDays = 30

    package init() {}

    /// After the server said it was unavailable (421, or no answer): how long the worker waits
    /// before it tries again, the poll interval at first and doubling up to five minutes while
    /// the server stays away (`previous` is the last pause, nil after a drain that went through).
    func serverPause(after previous: TimeInterval?) -> TimeInterval {
        min(previous.map { $0 * 2 } ?? pollInterval, max(pollInterval, 300))
    }

    /// The wait before attempt `attempts + 1`.
    func retryDelay(afterAttempt attempts: Int) -> TimeInterval {
        let exponential = baseDelay * pow(2, Double(max(0, attempts - 1)))
        return min(exponential, maxDelay) * Double.random(in: 0.75...1.25)
    }
}

/// A drain stopped because the mail server said it takes no mail now (421, or no answer): the
/// message it said so to is tried again later, the rest of the batch and the batch claimed
/// ahead are handed back untried (their attempt not counted), and the worker pauses.
package struct MailServerUnavailable: Error, CustomStringConvertible {
    package let reason: String
    package var description: String { "mail server unavailable: \(reason)" }
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
                 clock: any AppClock) {
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
                group.addTask { await client.listen("outbox", waking: [wake], logger: logger) }
                await work(wake: wake, stopping: stopping)
                group.cancelAll()
            }
        } onGracefulShutdown: {
            stopping.withLockedValue { $0 = true }
            Task { await wake.signal() }
        }
    }

    private func work(wake: WakeSignal, stopping: NIOLockedValueBox<Bool>) async {
        var pause: TimeInterval?
        while !stopping.withLockedValue({ $0 }) && !Task.isCancelled {
            do {
                try await drain(stopping: { stopping.withLockedValue { $0 } })
                pause = nil
            } catch let unavailable as MailServerUnavailable {
                pause = policy.serverPause(after: pause)
                logger.warning("mail server unavailable; pausing", metadata: [
                    "error": .string(unavailable.reason), "pause_seconds": .stringConvertible(Int(pause ?? 0))])
            } catch {
                logger.error("outbox batch failed", metadata: ["error": .string(String(reflecting: error))])
            }
            if let pause {
                await sleep(pause, wake: wake, stopping: stopping)
            } else {
                await wake.wait(timeout: policy.pollInterval)
            }
        }
    }

    /// Waits out `seconds` whatever wakes the worker meanwhile (new mail would meet the same
    /// server), but not a shutdown.
    private func sleep(_ seconds: TimeInterval, wake: WakeSignal, stopping: NIOLockedValueBox<Bool>) async {
        let until = clock.now().addingTimeInterval(seconds)
        while !stopping.withLockedValue({ $0 }) && !Task.isCancelled, case let left = until.timeIntervalSince(clock.now()), left > 0 {
            await wake.wait(timeout: left)
        }
    }

    /// One batch (see `drain`).
    @discardableResult
    package func drainOnce(stopping: @escaping @Sendable () -> Bool = { false }) async throws -> Int {
        try await drain(maxBatches: 1, stopping: stopping)
    }

    /// Claims and sends batches until one comes back short (the queue is empty for now),
    /// `maxBatches` are done or `stopping` says so; returns how many rows it claimed. While one
    /// batch is sent the next is claimed, and the transport's session (for SMTP, its connection)
    /// carries over, so neither stands between two batches. Outcomes are recorded while the
    /// next messages are sent (a crash then repeats at most the messages whose record had not
    /// committed; see `BatchDelivery`); rows not sent are handed back.
    @discardableResult
    package func drain(maxBatches: Int = .max, stopping: @escaping @Sendable () -> Bool = { false }) async throws -> Int {
        let sessions = SessionKeeper(transport: transport, clock: clock, reuse: policy.sessionReuse)
        var next: Task<Claim, any Error>? = claimTask()
        var claimed = 0, batches = 0
        do {
            while let pending = next, case let claim = try await pending.value, !claim.batch.isEmpty {
                next = nil
                if stopping() {
                    try await store.release(claim.batch.map(\.id), worker: id)
                    break
                }
                claimed += claim.batch.count
                batches += 1
                if claim.batch.count == policy.batchSize && batches < maxBatches { next = claimTask() }
                try await deliver(claim, with: sessions, stopping: stopping)
            }
        } catch {
            logger.debug("outbox drain stopped by an error", metadata: ["error": .string(String(reflecting: error))])
            if let next, let claim = try? await next.value { await handBack(claim.batch.map(\.id)) }
            await sessions.close()
            throw error
        }
        await sessions.close()
        return claimed
    }

    private typealias Claim = (batch: [ClaimedMessage], at: Date)
    static let handBackAttempts = 4

    private func claimTask() -> Task<Claim, any Error> {
        Task {
            let claimedAt = clock.now()
            return (try await store.claim(worker: id, batch: policy.batchSize, lease: policy.lease), claimedAt)
        }
    }

    private func deliver(_ claim: Claim, with sessions: SessionKeeper, stopping: @escaping @Sendable () -> Bool) async throws {
        var delivery = BatchDelivery(worker: self, batch: claim.batch, claimedAt: claim.at)
        do {
            try await delivery.send(with: sessions, stopping: stopping)
        } catch {
            logger.debug("outbox batch stopped; handing back what it did not record",
                         metadata: ["rows": .stringConvertible(delivery.unfinished.count)])
            await handBack(delivery.unfinished)
            throw error
        }
        try await store.release(delivery.unfinished, worker: id)
        if let reason = delivery.serverUnavailable { throw MailServerUnavailable(reason: reason) }
    }

    /// Releases rows after a failure, again (up to `handBackAttempts` in all) while tries meet an
    /// outage: the error that ended the batch may have been this very connection closing, and
    /// the pool can hand out a closed connection before it has heard of the close (under load,
    /// `make test` saw two in a row). Rows not released come back when their lease runs out.
    private func handBack(_ ids: [UUID]) async {
        for attempt in 1...Self.handBackAttempts {
            do {
                try await store.release(ids, worker: id)
                logger.debug("outbox rows handed back", metadata: ["rows": .stringConvertible(ids.count),
                                                                   "attempt": .stringConvertible(attempt)])
                return
            } catch where attempt < Self.handBackAttempts && DatabaseOutage.matches(error) {
                continue
            } catch {
                logger.warning("outbox rows not handed back; their lease will expire",
                               metadata: ["rows": .stringConvertible(ids.count), "error": .string(String(reflecting: error))])
                return
            }
        }
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
        case .temporaryFailure(let error) where message.attempts >= policy.maxAttempts,
             .serverUnavailable(let error) where message.attempts >= policy.maxAttempts:
            logger.warning("mail failed after retries", metadata: ["message_id": .string(message.messageID), "error": .string(error)])
            try await store.markFailed(message.id, worker: id, error: error, suppress: nil)
        case .temporaryFailure(let error), .serverUnavailable(let error):
            let delay = policy.retryDelay(afterAttempt: message.attempts)
            logger.info("mail deferred", metadata: ["message_id": .string(message.messageID), "error": .string(error),
                                                    "retry_in_seconds": .stringConvertible(Int(delay))])
            try await store.scheduleRetry(message.id, worker: id, after: delay, error: error)
        case .permanentFailure(let error):
            logger.warning("mail refused; address suppressed", metadata: ["message_id": .string(message.messageID), "error": .string(error)])
            try await store.markFailed(message.id, worker: id, error: error, suppress: message.recipient)
        }
    }
}
