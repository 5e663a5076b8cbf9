import BookwormCore
import Foundation

/// Sends one claimed batch in order on a thread of its own (`BatchSender`) and records outcomes
/// here while the next messages are on their way: one record is written at a time, and every
/// outcome reported meanwhile joins the next one (one statement for all that were sent).
///
/// A crash repeats at most the messages whose record had not committed: the sender waits when
/// `maxUnrecorded` rows before the next one lack a record. Against a local relay, outcomes are
/// grouped (`recordGroup`) so that the database is not written once per message; 32 messages are
/// some 15 ms of sending there. Against a slower server each outcome is recorded as it comes.
///
/// A row is sent only while this worker's lease on it is known to hold: until the lease it was
/// claimed or last renewed with, less a quarter for clock skew between workers. Half way through
/// the lease the rest of the batch is renewed; a row another worker has taken by then is skipped,
/// so a worker held up past its lease sends none of what it lost.
struct BatchDelivery {
    static let maxUnrecorded = 32
    /// Outcomes of quick sends are reported and recorded this many at a time: each record is a
    /// statement and a commit, which cost the database more than one local SMTP exchange.
    static let recordGroup = 16
    /// An outcome that took longer than this is reported at once with those before it: the
    /// server is slow, and the database has time to spare.
    static let slowSend = Duration.milliseconds(2)

    let worker: OutboxWorker
    let batch: [ClaimedMessage]
    /// Rows not yet recorded, in batch order: released at the end, so another worker sends them.
    private(set) var unfinished: [UUID]
    /// What the server answered when it said it takes no mail now; the sender stopped there.
    private(set) var serverUnavailable: String?
    private let ledger: DeliveryLedger
    private var renewedAt: Date
    /// Outcomes known but not yet handed to a record.
    private var waiting: [(ClaimedMessage, OutboxWorker.Step)] = []
    private var inFlight: Recording?

    init(worker: OutboxWorker, batch: [ClaimedMessage], claimedAt: Date) {
        self.worker = worker
        self.batch = batch
        unfinished = batch.map(\.id)
        renewedAt = claimedAt
        ledger = DeliveryLedger(ids: batch.map(\.id), sendBefore: claimedAt + worker.policy.lease * 3 / 4)
    }

    /// Sends and records the batch; on an error the sender is stopped, and the error is thrown
    /// once it has let go of its session.
    mutating func send(with sessions: SessionKeeper, stopping: @escaping @Sendable () -> Bool) async throws {
        var failure: (any Error)?
        for try await reports in BatchSender.start(batch, sessions: sessions, ledger: ledger, clock: worker.clock,
                                                  stopping: stopping) where failure == nil {
            do {
                try await take(reports)
            } catch {
                failure = error
                ledger.abort()
            }
        }
        worker.logger.trace("outbox sender done", metadata: ["failed": .stringConvertible(failure != nil)])
        do {
            if let failure { throw failure }
            try await finishInFlight()
            try await startRecording()
            try await finishInFlight()
        } catch {
            _ = try? await inFlight?.task.value
            throw error
        }
    }

    private mutating func take(_ reports: [BatchSender.Report]) async throws {
        guard let last = reports.last else { return }
        if worker.clock.now().timeIntervalSince(renewedAt) > worker.policy.lease / 2 {
            try await renew(batch[(last.index + 1)...].map(\.id))
        }
        for report in reports {
            if case .delivered(.serverUnavailable(let reason)) = report.step { serverUnavailable = reason }
        }
        waiting += reports.map { (batch[$0.index], $0.step) }
        try await startRecording()
    }

    /// Hands every waiting outcome to one record, once the previous record is done.
    private mutating func startRecording() async throws {
        try await finishInFlight()
        guard !waiting.isEmpty else { return }
        let outcomes = waiting, worker = self.worker, ledger = self.ledger
        waiting = []
        let done = OnceFlag()
        inFlight = Recording(ids: outcomes.map(\.0.id), done: done, task: Task {
            defer { done.set() }
            do {
                let sent = outcomes.compactMap { if case .delivered(.sent) = $0.1 { $0.0.id } else { nil } }
                try await worker.store.markSent(sent, worker: worker.id)
                for (message, step) in outcomes {
                    if case .delivered(.sent) = step { continue }
                    try await worker.record(step, for: message)
                }
                ledger.record(committed: outcomes.count)
            } catch {
                worker.logger.debug("outbox record failed; stopping the sender", metadata: ["error": .string(String(reflecting: error))])
                // The sender may be waiting for this record: it must stop, not wait for good.
                ledger.abort()
                throw error
            }
        })
    }

    /// Waits for the record in flight; its rows are then finished.
    private mutating func finishInFlight() async throws {
        guard let previous = inFlight else { return }
        inFlight = nil
        try await previous.task.value
        unfinished.removeAll { previous.ids.contains($0) }
    }

    /// Renews `ids`; those another worker took are no longer sent.
    private mutating func renew(_ ids: [UUID]) async throws {
        let issuedAt = worker.clock.now()
        let held = try await worker.store.renew(ids, worker: worker.id, lease: worker.policy.lease)
        ledger.renewed(ids, held: held, sendBefore: issuedAt + worker.policy.lease * 3 / 4)
        renewedAt = issuedAt
    }
}

/// One record being written, and whether it is done (checked without waiting).
private struct Recording {
    let ids: [UUID]
    let done: OnceFlag
    let task: Task<Void, any Error>
}
