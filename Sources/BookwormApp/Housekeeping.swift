import Accounts
import BookwormCore
import Foundation
import Logging
import Mail
import Portability

/// Every ten minutes deletes dead sessions and old throttle events, so those tables stay small,
/// drops the content of long-failed mail, purges old sync tombstones, lifts username holds,
/// drops expired exports, abandoned import uploads and idempotency keys past their lifetime. A recurring row on the leased `jobs` table, so one runner in the whole
/// deployment does it each time (it used to be a timer in every `serve` process, each sweeping
/// the same tables), it waits while the database is away as every job does, and it runs
/// wherever background jobs run: `serve` without `--no-worker`, or `bookworm worker`.
struct Housekeeping: JobHandler {
    let kind = "housekeeping"
    let recurringKey: String? = "every-10-minutes"
    let sessions: SessionStore
    let throttles: ThrottleStore
    let outbox: OutboxStore
    let syncLog: SyncStore
    let sync: SyncPolicy
    let holds: ErasureSweep
    let exports: ExportService
    let imports: ImportService
    let idempotency: IdempotencyStore
    let failedMailRetentionDays: Int
    let logger: Logger
    let clock: any AppClock
    var interval: TimeInterval = 600

    func sweep() async throws {
        try await sessions.deleteExpired()
        try await throttles.deleteOlderThan(seconds: 86400)
        try await outbox.dropFailedContent(olderThanDays: failedMailRetentionDays)
        try await syncLog.purgeTombstones(before: clock.now().addingTimeInterval(-Double(sync.tombstoneDays) * 86400))
        try await holds.lift(before: clock.now())
        try await holds.scrubConfirmations()
        try await exports.dropExpired()
        try await imports.dropAbandonedUploads()
        while try await idempotency.purge() > 0 {}
    }

    func firstRun(after now: Date) -> Date { now.addingTimeInterval(interval) }

    func run(_ job: ClaimedJob) async throws -> JobOutcome {
        try await sweep()
        return .again(at: clock.now().addingTimeInterval(interval))
    }
}
