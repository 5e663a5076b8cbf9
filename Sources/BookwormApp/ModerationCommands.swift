import Accounts
import BookwormCore
import Exchange
import Foundation
import Logging
import Mail
import PostgresNIO

/// `bookworm reports …`, `bookworm users …`, `bookworm audit list`: parsed by the executable,
/// run here against the configured database, recorded in the admin audit log.
package enum ModerationAction: Sendable {
    case listReports(status: String?, limit: Int)
    case showReport(UUID)
    case resolve(UUID, ReportAction, reason: String?)
    case showUser(String)
    case suspend(String, reason: String?)
    case unsuspend(String, reason: String?)
    case audit(limit: Int)
}

package func runModerationCommand(_ action: ModerationAction, actor: AdminActor, config: Config, logger: Logger) async throws -> String {
    try await withCommandDatabase(config: config, logger: logger) { client in
        let database = Database.forAdministration(client)
        try await requireCurrentSchema(client: client, logger: logger)
        let trades = config.tradesService(client: database, logger: logger)
        let admin = ModerationAdmin(client: database, users: AccountsStore(client: database, logger: logger),
                                    sessions: SessionStore(client: database, policy: config.sessions, logger: logger, clock: config.clock),
                                    trades: trades, actor: actor, clock: config.clock, logger: logger)
        switch action {
        case .listReports(let status, let limit): return try await admin.listReports(status: status, limit: limit)
        case .showReport(let id): return try await admin.showReport(id)
        case .resolve(let id, let how, let reason): return try await admin.resolve(id, action: how, reason: reason)
        case .showUser(let username): return try await admin.showUser(username)
        case .suspend(let username, let reason): return try await admin.suspend(username, reason: reason)
        case .unsuspend(let username, let reason): return try await admin.unsuspend(username, reason: reason)
        case .audit(let limit): return try await admin.auditList(limit: limit)
        }
    }
}

/// Admin commands act on a migrated database only (`bookworm migrate up`, or `serve --migrate`).
func requireCurrentSchema(client: PostgresClient, logger: Logger) async throws {
    let migrator = try Migrator.bundled()
    let pending = try await migrator.pending(client: client, logger: logger)
    guard pending.isEmpty else { throw MigrationError.pending(pending.map(\.name)) }
}
