import BookwormCore
import Foundation

/// Sends one claimed batch in order and records outcomes while the next messages are on their
/// way: one record is written at a time, and every message sent meanwhile joins the next one
/// (one statement for all that were sent). The database's round trip and commit no longer add to
/// each SMTP round trip. A crash repeats at most the messages whose record had not committed:
/// the one in flight and at most `maxUnrecorded` before it (usually one).
///
/// A row is sent only while this worker's lease on it is known to hold: until the lease it was
/// claimed or last renewed with, less a quarter for clock skew between workers. Half way through
/// the lease the rest of the batch is renewed; a row another worker has taken by then is skipped,
/// so a worker held up past its lease sends none of what it lost.
struct BatchDelivery {
    static let maxUnrecorded = 8

    let worker: OutboxWorker
    let batch: [ClaimedMessage]
    /// Rows not yet recorded, in batch order: released at the end, so another worker sends them.
    private(set) var unfinished: [UUID]
    private var heldUntil: [UUID: Date]
    private var renewedAt: Date
    /// Outcomes known but not yet handed to a record.
    private var waiting: [(ClaimedMessage, OutboxWorker.Step)] = []
    private var inFlight: Recording?

    init(worker: OutboxWorker, batch: [ClaimedMessage], claimedAt: Date) {
        self.worker = worker
        self.batch = batch
        unfinished = batch.map(\.id)
        renewedAt = claimedAt
        heldUntil = Dictionary(uniqueKeysWithValues: batch.map { ($0.id, claimedAt + worker.policy.lease) })
    }

    mutating func send(over session: any MailSession, stopping: () -> Bool) async throws {
        do {
            for (index, message) in batch.enumerated() {
                if stopping() { break }
                if worker.clock.now().timeIntervalSince(renewedAt) > worker.policy.lease / 2 {
                    try await renew(batch[index...].map(\.id))
                }
                let step: OutboxWorker.Step = !isHeld(message.id) ? .skipped
                    : message.suppressed ? .suppressed
                    : .delivered(await session.send(OutgoingMessage(messageID: message.messageID, envelopeFrom: message.envelopeFrom,
                                                                    recipient: message.recipient, content: message.content)))
                waiting.append((message, step))
                if inFlight?.done.isSet ?? true || waiting.count >= Self.maxUnrecorded {
                    try await startRecording()
                }
            }
            try await finishInFlight()
            try await startRecording()
            try await finishInFlight()
        } catch {
            _ = try? await inFlight?.task.value
            throw error
        }
    }

    private func isHeld(_ id: UUID) -> Bool {
        guard let until = heldUntil[id] else { return false }
        return worker.clock.now() < until - worker.policy.lease / 4
    }

    /// Hands every waiting outcome to one record, once the previous record is done.
    private mutating func startRecording() async throws {
        try await finishInFlight()
        guard !waiting.isEmpty else { return }
        let outcomes = waiting, worker = self.worker
        waiting = []
        let done = OnceFlag()
        inFlight = Recording(ids: outcomes.map(\.0.id), done: done, task: Task {
            defer { done.set() }
            let sent = outcomes.compactMap { if case .delivered(.sent) = $0.1 { $0.0.id } else { nil } }
            try await worker.store.markSent(sent, worker: worker.id)
            for (message, step) in outcomes {
                if case .delivered(.sent) = step { continue }
                try await worker.record(step, for: message)
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

    /// Renews `ids`; those another worker took are no longer held.
    private mutating func renew(_ ids: [UUID]) async throws {
        let issuedAt = worker.clock.now()
        let held = try await worker.store.renew(ids, worker: worker.id, lease: worker.policy.lease)
        for id in ids { heldUntil[id] = held.contains(id) ? issuedAt + worker.policy.lease : nil }
        renewedAt = issuedAt
    }
}

/// One record being written, and whether it is done (checked without waiting).
private struct Recording {
    let ids: [UUID]
    let done: OnceFlag
    let task: Task<Void, any Error>
}
