import Accounts
import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// Filing a report: one open report per reporter and target, and a copy or post that enough
/// different people reported is hidden until an admin decides (`ModerationService`).
package struct ReportsService: Sendable {
    let client: Database
    let reports: ReportsStore
    let policy: ReportPolicy
    let clock: any AppClock
    let logger: Logger

    package init(client: Database, reports: ReportsStore, policy: ReportPolicy, clock: any AppClock, logger: Logger) {
        self.client = client
        self.reports = reports
        self.policy = policy
        self.clock = clock
        self.logger = logger
    }

    package struct Filed: Sendable {
        let id: UUID
        let hidden: Bool
    }

    /// Every report is filed (and reaches the queue); only trusted reporters, one per client
    /// address, count toward hiding, so a handful of fresh accounts cannot take anyone's copy down.
    func file(by reporter: UUID, from address: String, target: ReportTarget, reason: ReportReason,
              details: String?) async throws -> Filed {
        let now = clock.now()
        return try await client.transaction(logger: logger) { connection in
            guard let (targetID, owner) = try await reports.lockTarget(target, on: connection) else {
                throw AppError.notFound("No \(target.kind) to report there")
            }
            guard owner != reporter else { throw AppError.broken("target", "is your own") }
            guard let id = try await reports.insert(reporter: reporter, address: address, kind: target.kind, targetID: targetID,
                                                    owner: owner, reason: reason.rawValue, details: details, at: now,
                                                    on: connection) else {
                throw AppError.conflict(code: "already_reported", detail: "You already have an open report on this \(target.kind)",
                                        field: "target")
            }
            guard target.kind != "user" else { return Filed(id: id, hidden: false) }
            let trustedSince = now.addingTimeInterval(-Double(policy.minAccountHours) * 3600)
            let reporters = try await reports.trustedReporters(kind: target.kind, targetID: targetID, createdBefore: trustedSince,
                                                               on: connection)
            guard reporters >= policy.hideThreshold else { return Filed(id: id, hidden: false) }
            try await reports.setHidden(kind: target.kind, targetID: targetID, at: now, on: connection)
            logger.notice("hidden after reports", metadata: ["kind": .string(target.kind), "id": .string(targetID.apiString),
                                                             "reporters": .stringConvertible(reporters)])
            return Filed(id: id, hidden: true)
        }
    }
}
