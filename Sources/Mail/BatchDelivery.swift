import BookwormCore
import Foundation

/// Sends one claimed batch in order, recording each outcome while the next message is on its
/// way: the database's round trip per message (a commit) no longer adds to the SMTP server's.
///
/// A row is sent only while this worker's lease on it is known to hold: until the lease it was
/// claimed or last renewed with, less a quarter for clock skew between workers. A row whose lease
/// is past that is renewed first, and skipped if another worker has taken it, so a worker held up
/// past its lease sends none of what it lost (only the message that was in flight may repeat).
/// Half way through the lease the rest of the batch is renewed.
struct BatchDelivery {
    let worker: OutboxWorker
    let batch: [ClaimedMessage]
    /// Rows not yet recorded, in batch order: released at the end, so another worker sends them.
    private(set) var unfinished: [UUID]
    private var heldUntil: [UUID: Date]
    private var renewedAt: Date
    private var inFlight: (id: UUID, task: Task<Void, any Error>)?

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
                } else if !isHeld(message.id) {
                    try await renew([message.id])
                }
                let step: OutboxWorker.Step = !isHeld(message.id) ? .skipped
                    : message.suppressed ? .suppressed
                    : .delivered(await session.send(OutgoingMessage(messageID: message.messageID, envelopeFrom: message.envelopeFrom,
                                                                    recipient: message.recipient, content: message.content)))
                try await finishInFlight()
                let worker = self.worker
                inFlight = (message.id, Task { try await worker.record(step, for: message) })
            }
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

    /// Waits for the previous row's record; the row is then finished.
    private mutating func finishInFlight() async throws {
        guard let previous = inFlight else { return }
        inFlight = nil
        try await previous.task.value
        unfinished.removeAll { $0 == previous.id }
    }

    /// Renews `ids` (the record in flight first, so statements stay in order); those another
    /// worker took are no longer held.
    private mutating func renew(_ ids: [UUID]) async throws {
        try await finishInFlight()
        let issuedAt = worker.clock.now()
        let held = try await worker.store.renew(ids, worker: worker.id, lease: worker.policy.lease)
        for id in ids { heldUntil[id] = held.contains(id) ? issuedAt + worker.policy.lease : nil }
        if ids.count > 1 { renewedAt = issuedAt }
    }
}
