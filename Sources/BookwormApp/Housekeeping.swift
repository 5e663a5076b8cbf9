import Accounts
import BookwormCore
import Foundation
import Logging
import Mail
import Portability
import ServiceLifecycle

/// Periodically deletes dead sessions and old throttle events, so those tables stay small, and
/// drops the content of long-failed mail. Idempotent, so several instances may run it.
struct Housekeeping: Service {
    let sessions: SessionStore
    let throttles: ThrottleStore
    let outbox: OutboxStore
    let syncLog: SyncStore
    let sync: SyncPolicy
    let holds: ErasureSweep
    let exports: ExportService
    let failedMailRetentionDays: Int
    let logger: Logger
    let clock: any AppClock
    var interval: Duration = .seconds(600)

    func sweep() async throws {
        try await sessions.deleteExpired()
        try await throttles.deleteOlderThan(seconds: 86400)
        try await outbox.dropFailedContent(olderThanDays: failedMailRetentionDays)
        try await syncLog.purgeTombstones(before: clock.now().addingTimeInterval(-Double(sync.tombstoneDays) * 86400))
        try await holds.lift(before: clock.now())
        try await holds.scrubConfirmations()
        try await exports.dropExpired()
    }

    func run() async throws {
        while await sleepOneInterval() {
            do {
                try await sweep()
            } catch {
                logger.warning("housekeeping failed", metadata: ["error": .string(String(reflecting: error))])
            }
        }
    }

    /// False once the service is shutting down.
    private func sleepOneInterval() async -> Bool {
        (try? await cancelWhenGracefulShutdown { try await clock.sleep(for: interval) }) != nil
            && !Task.isShuttingDownGracefully && !Task.isCancelled
    }
}
