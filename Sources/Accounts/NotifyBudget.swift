import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// How often one person may make the service mail (or push) other people on their behalf:
/// trade requests, counters, cancels, declines, contact and instant wish alerts (set off by
/// listing a copy) all draw on the same budget; alerts on the per-recipient part only.
package struct NotifyPolicy: Sendable {
    /// Per sender and recipient, over a sliding day (`BOOKWORM_NOTIFY_PER_RECIPIENT_PER_DAY`).
    package var perRecipientPerDay: Int
    /// Per sender across all recipients, over a sliding hour (`BOOKWORM_NOTIFY_PER_SENDER_PER_HOUR`).
    package var perSenderPerHour: Int

    package init(perRecipientPerDay: Int = 10, perSenderPerHour: Int = 30) {
        self.perRecipientPerDay = perRecipientPerDay
        self.perSenderPerHour = perSenderPerHour
    }
}

/// The notify budget, counted in `throttle_events` on the caller's transaction, so a refused
/// request or a rolled-back step counts nothing and a counted one is the one whose mail is queued.
package struct NotifyBudget: Sendable {
    let throttles: ThrottleStore
    let policy: NotifyPolicy

    package init(throttles: ThrottleStore, policy: NotifyPolicy) {
        self.throttles = throttles
        self.policy = policy
    }

    /// For what exists only to notify (a new trade request, a contact): a 429 past the budget,
    /// and the caller's transaction rolls back, so nothing is created.
    package func charge(from sender: UUID, to recipient: UUID, on connection: PostgresConnection) async throws {
        if let wait = try await lockAndWait(from: sender, to: recipient, on: connection) {
            throw AppError.throttled(retryAfterSeconds: wait)
        }
        try await record(from: sender, to: recipient, on: connection)
    }

    /// For a step that must happen anyway (a cancel, a decline, a counter): whether its mail may
    /// go; counted only when it may.
    package func spend(from sender: UUID, to recipient: UUID, on connection: PostgresConnection) async throws -> Bool {
        guard try await lockAndWait(from: sender, to: recipient, on: connection) == nil else { return false }
        try await record(from: sender, to: recipient, on: connection)
        return true
    }

    /// For wish alerts, which a copy's owner sets off by listing it: those of `recipients` the
    /// owner may still notify today, each counted once. Only the pair's budget applies: the owner
    /// does not choose how many people wish for the book. One statement for a whole batch.
    package func spendEach(from sender: UUID, to recipients: [UUID], on connection: PostgresConnection) async throws -> Set<UUID> {
        guard !recipients.isEmpty else { return [] }
        try await throttles.lock(key: Self.senderKey(sender), on: connection)
        return try await throttles.recordUnder(keys: recipients.map { Self.pairKey(sender, $0) }, for: recipients,
                                               limit: policy.perRecipientPerDay, window: 86400, on: connection)
    }

    /// Seconds until the sender may notify the recipient again, or nil. The lock is the sender's
    /// (it covers every pair of theirs too), held until the transaction ends, so parallel requests
    /// cannot all pass the check before any of them is counted. Callers take it after their row
    /// locks and only insert after it, so it never closes a cycle of waits.
    private func lockAndWait(from sender: UUID, to recipient: UUID, on connection: PostgresConnection) async throws -> Int? {
        try await throttles.lock(key: Self.senderKey(sender), on: connection)
        let pair = try await throttles.retryAfter(key: Self.pairKey(sender, recipient), limit: policy.perRecipientPerDay,
                                                  window: 86400, on: connection)
        let hour = try await throttles.retryAfter(key: Self.senderKey(sender), limit: policy.perSenderPerHour, window: 3600,
                                                  on: connection)
        return [pair, hour].compactMap { $0 }.max()
    }

    private func record(from sender: UUID, to recipient: UUID, on connection: PostgresConnection) async throws {
        try await throttles.record(keys: [Self.pairKey(sender, recipient)], window: 86400, on: connection)
        try await throttles.record(keys: [Self.senderKey(sender)], window: 3600, on: connection)
    }

    // Both keys name the sender's id, so erasure's sweep of `throttle_events` takes them too.
    static func senderKey(_ sender: UUID) -> String { "notify:sender:\(sender.apiString)" }
    static func pairKey(_ sender: UUID, _ recipient: UUID) -> String { "notify:pair:\(sender.apiString):\(recipient.apiString)" }
}
