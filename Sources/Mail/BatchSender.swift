import BookwormCore
import Foundation
import NIOConcurrencyHelpers
import NIOPosix

/// What the sending thread and the recording side of one batch share: which rows may still be
/// sent, and how far the records have come. Guarded by one condition, on which the sender waits
/// when it is too far ahead of the records.
final class DeliveryLedger: @unchecked Sendable {
    private let condition = NSCondition()
    /// Per row: the moment after which it is no longer sent (its lease less the skew margin).
    private var sendBefore: [UUID: Date]
    /// Rows of the batch whose outcome has committed (always a prefix: records go in order).
    private var recorded = 0
    private var aborted = false

    init(ids: [UUID], sendBefore deadline: Date) {
        sendBefore = Dictionary(uniqueKeysWithValues: ids.map { ($0, deadline) })
    }

    func mayStillSend(_ id: UUID, at now: Date) -> Bool {
        condition.withLock { sendBefore[id].map { now < $0 } ?? false }
    }

    /// After a renewal: `held` rows get a new deadline, the rest of `ids` are lost.
    func renewed(_ ids: [UUID], held: Set<UUID>, sendBefore deadline: Date) {
        condition.withLock {
            for id in ids { sendBefore[id] = held.contains(id) ? deadline : nil }
        }
    }

    /// Whether the row at `index` may be sent now: at most `limit` rows before it lack a
    /// committed record, and the batch is not abandoned.
    func hasRoom(before index: Int, limit: Int) -> Bool {
        condition.withLock { !aborted && index - recorded <= limit }
    }

    /// Blocks until `hasRoom`; false once the batch is abandoned.
    func waitForRoom(before index: Int, limit: Int) -> Bool {
        condition.withLock {
            while !aborted && index - recorded > limit { condition.wait() }
            return !aborted
        }
    }

    func record(committed count: Int) {
        condition.withLock {
            recorded += count
            condition.broadcast()
        }
    }

    var isAborted: Bool { condition.withLock { aborted } }

    /// Stops the sender at its next message (an error on the recording side, or a cancelled task).
    func abort() {
        condition.withLock {
            aborted = true
            condition.broadcast()
        }
    }
}

/// The thread that sends one batch: it takes the session, sends message after message, and
/// reports steps in groups (`BatchDelivery.recordGroup`), at once after a slow send, and before
/// it waits for records to catch up. Nothing it does waits on the database unless it is that far
/// ahead, so the only round trips between two messages are the SMTP server's.
enum BatchSender {
    typealias Report = (index: Int, step: OutboxWorker.Step)

    static func start(_ batch: [ClaimedMessage], sessions: SessionKeeper, ledger: DeliveryLedger, clock: any AppClock,
                      stopping: @escaping @Sendable () -> Bool) -> AsyncThrowingStream<[Report], any Error> {
        let (reports, continuation) = AsyncThrowingStream.makeStream(of: [Report].self)
        continuation.onTermination = { _ in ledger.abort() }
        let thread = Thread {
            let kept: SessionKeeper.Kept
            do {
                kept = try sessions.take()
            } catch {
                continuation.finish(throwing: error)
                return
            }
            var pending: [Report] = []
            var unavailable = false
            func flush() {
                if !pending.isEmpty { continuation.yield(pending) }
                pending = []
            }
            for (index, message) in batch.enumerated() {
                if stopping() { break }
                if !ledger.hasRoom(before: index, limit: BatchDelivery.maxUnrecorded) {
                    flush()
                    guard ledger.waitForRoom(before: index, limit: BatchDelivery.maxUnrecorded) else { break }
                }
                let started = ContinuousClock.now
                let sent = step(for: message, over: kept.session, ledger: ledger, clock: clock)
                pending.append((index, sent))
                // The server takes no mail now: the rest of the batch would only hear the same.
                if case .delivered(.serverUnavailable) = sent {
                    unavailable = true
                    break
                }
                if pending.count >= BatchDelivery.recordGroup || ContinuousClock.now - started > BatchDelivery.slowSend { flush() }
            }
            flush()
            if ledger.isAborted || unavailable { kept.session.close() } else { sessions.keep(kept) }
            continuation.finish()
        }
        thread.name = "outbox-sender"
        thread.start()
        return reports
    }

    private static func step(for message: ClaimedMessage, over session: any MailSession, ledger: DeliveryLedger,
                             clock: any AppClock) -> OutboxWorker.Step {
        if !ledger.mayStillSend(message.id, at: clock.now()) { return .skipped }
        if message.suppressed { return .suppressed }
        return .delivered(session.send(OutgoingMessage(messageID: message.messageID, envelopeFrom: message.envelopeFrom,
                                                       recipient: message.recipient, content: message.content)))
    }
}

/// The transport's session carried from one batch to the next of a drain, so an SMTP connection
/// is opened once for many batches, not once per batch; but not for longer than the policy's
/// `sessionReuse` (as Postfix's `smtp_connection_reuse_time_limit`), so that a connection a
/// relay has grown tired of, or one to an address the name no longer points to, does not live on.
final class SessionKeeper: Sendable {
    struct Kept: Sendable {
        let session: any MailSession
        let openedAt: Date
    }

    private let transport: any MailTransport
    private let clock: any AppClock
    private let reuse: TimeInterval
    private let kept = NIOLockedValueBox<Kept?>(nil)

    init(transport: any MailTransport, clock: any AppClock, reuse: TimeInterval) {
        self.transport = transport
        self.clock = clock
        self.reuse = reuse
    }

    /// The kept session while it is young enough, else a new one (on the sending thread: it blocks).
    func take() throws -> Kept {
        if let old = kept.withLockedValue({ kept in defer { kept = nil }; return kept }) {
            if clock.now().timeIntervalSince(old.openedAt) < reuse { return old }
            old.session.close()
        }
        let openedAt = clock.now()
        return Kept(session: try transport.openSession(), openedAt: openedAt)
    }

    func keep(_ session: Kept) {
        kept.withLockedValue { $0 = session }
    }

    /// Closes the kept session (for SMTP a QUIT, which blocks) off the cooperative pool.
    func close() async {
        guard let old = kept.withLockedValue({ kept in defer { kept = nil }; return kept }) else { return }
        _ = try? await NIOThreadPool.singleton.runIfActive { old.session.close() }
    }
}
