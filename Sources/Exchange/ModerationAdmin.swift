import Accounts
import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// The admin's commands for reports and accounts (`bookworm reports …`, `bookworm users …`,
/// `bookworm audit list`), as readable text. Each change and its audit row share a transaction.
package struct ModerationAdmin: Sendable {
    let client: Database
    let reports: ReportsStore
    let users: AccountsStore
    let sessions: SessionStore
    let audit: AuditLog
    let trades: TradesService
    let actor: AdminActor
    let clock: any AppClock
    let logger: Logger

    package init(client: Database, users: AccountsStore, sessions: SessionStore, trades: TradesService, actor: AdminActor,
                 clock: any AppClock, logger: Logger) {
        self.client = client
        self.trades = trades
        self.reports = ReportsStore(client: client, logger: logger)
        self.users = users
        self.sessions = sessions
        self.audit = AuditLog(client: client, logger: logger)
        self.actor = actor
        self.clock = clock
        self.logger = logger
    }

    static func time(_ date: Date) -> String { date.formatted(.iso8601) }

    package func listReports(status: String?, limit: Int) async throws -> String {
        let records = try await reports.list(status: status, limit: limit)
        var table = [["ID", "CREATED", "STATUS", "TARGET", "OWNER", "REASON", "REPORTERS", "HIDDEN"]]
        for r in records {
            table.append([r.id.apiString, Self.time(r.createdAt), r.status, "\(r.targetKind) \(r.targetID.apiString)",
                          r.targetUser, r.reason, "\(r.openOnTarget)", r.targetHidden ? "yes" : "no"])
        }
        if records.isEmpty { return "no \(status ?? "") reports".replacingOccurrences(of: "  ", with: " ") }
        return TextTable.render(table)
    }

    package func showReport(_ id: UUID) async throws -> String {
        let records = try await reports.withSiblings(id)
        guard let report = records.first else { throw AppError.notFound("No report with id \(id.apiString)") }
        var lines = [
            "report      \(report.id.apiString)",
            "status      \(report.status)" + (report.resolvedAt.map { " (\(Self.time($0)))" } ?? ""),
            "target      \(report.targetKind) \(report.targetID.apiString), owned by \(report.targetUser)"
                + (report.targetHidden ? ", hidden" : ""),
            "reporter    \(report.reporter) on \(Self.time(report.createdAt))",
            "reason      \(report.reason)",
            "details     \(report.details ?? "-")",
            "",
            "every report on this target (\(report.openOnTarget) open, by different people):",
        ]
        var table = [["ID", "CREATED", "STATUS", "REPORTER", "REASON", "DETAILS"]]
        for r in records {
            table.append([r.id.apiString, Self.time(r.createdAt), r.status, r.reporter, r.reason,
                          String((r.details ?? "-").prefix(60))])
        }
        lines.append(TextTable.render(table))
        return lines.joined(separator: "\n")
    }

    /// Closes the report and every other open one on its target, with the action's effect.
    package func resolve(_ id: UUID, action: ReportAction, reason: String?) async throws -> String {
        let now = clock.now()
        return try await client.transaction(logger: logger) { connection in
            guard let report = try await reports.lock(id, on: connection) else { throw AppError.notFound("No report with id \(id.apiString)") }
            guard report.status == "open" else {
                throw AppError.conflict(code: "already_resolved", detail: "Report \(id.apiString) is already \(report.status)", field: nil)
            }
            var effect: String
            switch action {
            case .dismiss:
                try await reports.setHidden(kind: report.kind, targetID: report.target, at: nil, on: connection)
                effect = report.kind == "user" ? "nothing changed" : "the \(report.kind) is shown again"
            case .remove:
                guard report.kind != "user" else { throw AppError.broken("action", "remove applies to a copy or post; suspend the user") }
                try await reports.setHidden(kind: report.kind, targetID: report.target, at: now, on: connection)
                effect = "the \(report.kind) stays hidden from everyone but its owner"
            case .suspend:
                let cancelled = try await suspend(report.owner, at: now, reason: reason, on: connection)
                effect = "its owner is suspended and signed out" + Self.cancelledTrades(cancelled)
            }
            let closed = try await reports.close(kind: report.kind, targetID: report.target, status: action.status, at: now, on: connection)
            try await audit.record(actor: actor.name, host: actor.host, action: "reports.resolve.\(action.rawValue)",
                                   target: "report \(id.apiString) (\(report.kind) \(report.target.apiString))", reason: reason,
                                   at: now, on: connection)
            return "\(closed) open report(s) on the \(report.kind) closed as \(action.status); \(effect)"
        }
    }
}
