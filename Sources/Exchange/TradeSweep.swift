import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// The recurring trade job: expires trades past their window (each in its own transaction,
/// through `TradesService.act`, so it takes the same locks as a participant) and mails
/// borrowers before a loan is due and once when it is overdue. Runs on the leased jobs
/// machinery, so any number of workers may carry it; every step is safe to repeat.
package struct TradeSweep: JobHandler {
    package let kind = "trades.sweep"
    package let recurringKey: String? = "all"
    let service: TradesService
    let batch = 200

    package init(service: TradesService) {
        self.service = service
    }

    package func run(_ job: ClaimedJob) async throws -> JobOutcome {
        let now = service.clock.now()
        while true {
            let due = try await dueForExpiry(now: now)
            var failed = 0
            for id in due {
                // One trade that cannot expire (a failing statement) must not hold up the rest.
                do {
                    _ = try await service.act(.expire, on: id, by: nil)
                } catch {
                    failed += 1
                    service.logger.error("trade expiry failed", metadata: ["trade": .string(id.apiString),
                                                                          "error": .string(String(reflecting: error))])
                }
            }
            if due.count < batch || failed == due.count { break }
        }
        try await remind(.dueSoon, now: now)
        try await remind(.overdue, now: now)
        return .again(at: now.addingTimeInterval(service.policy.sweepInterval))
    }

    private func dueForExpiry(now: Date) async throws -> [UUID] {
        let rows = try await service.client.query("""
            SELECT id FROM trades WHERE state IN ('requested', 'accepted') AND expires_at <= \(now) ORDER BY expires_at LIMIT \(batch)
            """, logger: service.logger)
        var ids: [UUID] = []
        for try await id in rows.decode(UUID.self) { ids.append(id) }
        return ids
    }

    /// Marks a batch of lent copies' trades as reminded and queues their mails in one
    /// transaction (trade rows only, skipping any a participant holds right now).
    private func remind(_ notice: TradeNotice, now: Date) async throws {
        let days = service.policy.reminderDaysBeforeDue
        while true {
            let count = try await service.client.transaction(logger: service.logger) { connection in
                let column = notice == .dueSoon ? "reminded_at" : "overdue_mailed_at"
                // Due dates are calendar days in UTC; a loan is overdue once its due day has passed.
                let condition = notice == .dueSoon
                    ? "t.due_on <= (\(TradeSweep.utcDay(now)))::date + \(Int(days.rounded(.up)))"
                    : "t.due_on < (\(TradeSweep.utcDay(now)))::date"
                let rows = try await connection.query("""
                    UPDATE trades SET \(unescaped: column) = \(now)
                    WHERE id IN (SELECT t.id FROM trades t
                                 WHERE t.state = 'completed' AND t.kind = 'loan' AND t.\(unescaped: column) IS NULL
                                   AND \(unescaped: condition)
                                 ORDER BY t.due_on LIMIT \(batch) FOR UPDATE SKIP LOCKED)
                    RETURNING id
                    """, logger: service.logger)
                var ids: [UUID] = []
                for try await id in rows.decode(UUID.self) { ids.append(id) }
                for id in ids { try await service.mail.notify(notice, trade: id, recipients: [.requester], on: connection) }
                return ids.count
            }
            if count < batch { return }
        }
    }

    /// The UTC calendar day of `date` as a SQL date literal (the server's time zone plays no part).
    static func utcDay(_ date: Date) -> String { "'\(TradesStore.dateString(date))'" }
}
