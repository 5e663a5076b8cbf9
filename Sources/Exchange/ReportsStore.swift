import Accounts
import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// SQL for reports: filing one (the target locked, so counting reporters is never raced),
/// hiding what enough people reported, and the admin's queue.
package struct ReportsStore: Sendable {
    package let client: Database
    package let logger: Logger

    package init(client: Database, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// The target's id and its owner, when the reporter may see it. A copy or post is locked:
    /// every report on it queues here, so each count of reporters sees the ones before it.
    func lockTarget(_ target: ReportTarget, on connection: PostgresConnection) async throws -> (id: UUID, owner: UUID)? {
        let query: PostgresQuery
        switch target {
        case .user(let username):
            query = """
                SELECT u.id, u.id FROM users u
                WHERE lower(u.username) = \(username.lowercased()) AND u.suspended_at IS NULL AND u.erased_at IS NULL
                """
        case .copy(let id):
            query = """
                SELECT c.id, c.owner_id FROM copies c
                WHERE c.id = \(id) AND c.status <> 'withdrawn' AND \(unescaped: Visibility.shown("c", owner: "owner_id"))
                FOR UPDATE OF c
                """
        case .post(let id):
            query = """
                SELECT po.id, po.author_id FROM posts po
                WHERE po.id = \(id) AND \(unescaped: Visibility.shown("po", owner: "author_id"))
                FOR UPDATE OF po
                """
        }
        for try await (id, owner) in try await connection.query(query, logger: logger).decode((UUID, UUID).self) {
            return (id, owner)
        }
        return nil
    }

    /// Nil when this reporter already has an open report on the target.
    func insert(reporter: UUID, address: String, kind: String, targetID: UUID, owner: UUID, reason: String, details: String?,
                at now: Date, on connection: PostgresConnection) async throws -> UUID? {
        let rows = try await connection.query("""
            INSERT INTO reports (reporter_id, client_address, target_kind, target_id, target_user_id, reason, details, created_at)
            VALUES (\(reporter), \(address), \(kind), \(targetID), \(owner), \(reason), \(details), \(now))
            ON CONFLICT (reporter_id, target_kind, target_id) WHERE status = 'open' DO NOTHING
            RETURNING id
            """, logger: logger)
        for try await id in rows.decode(UUID.self) { return id }
        return nil
    }

    /// Open reports on the target whose reporters have a verified address and an account created
    /// before `createdBefore`, counted once per client address (a report from before addresses
    /// were kept counts as its own).
    func trustedReporters(kind: String, targetID: UUID, createdBefore: Date, on connection: PostgresConnection) async throws -> Int {
        let rows = try await connection.query("""
            SELECT count(DISTINCT coalesce(r.client_address, r.reporter_id::text))::int8
            FROM reports r JOIN users u ON u.id = r.reporter_id
            WHERE r.target_kind = \(kind) AND r.target_id = \(targetID) AND r.status = 'open'
              AND u.email_verified_at IS NOT NULL AND u.created_at <= \(createdBefore)
            """, logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    /// Hides (or, with nil, shows again) a copy or post; users are never hidden, only suspended.
    func setHidden(kind: String, targetID: UUID, at hiddenAt: Date?, on connection: PostgresConnection) async throws {
        switch kind {
        case "copy":
            try await connection.query("UPDATE copies SET hidden_at = \(hiddenAt) WHERE id = \(targetID)", logger: logger)
        case "post":
            try await connection.query("UPDATE posts SET hidden_at = \(hiddenAt) WHERE id = \(targetID)", logger: logger)
        default:
            return
        }
    }

    // MARK: - The admin's side

    static let recordColumns = """
        r.id, reporter.username, r.target_kind, r.target_id, owner.username, r.reason, r.details, r.status, r.created_at,
        r.resolved_at,
        (SELECT count(DISTINCT o.reporter_id) FROM reports o
         WHERE o.target_kind = r.target_kind AND o.target_id = r.target_id AND o.status = 'open')::int8,
        coalesce((SELECT c.hidden_at IS NOT NULL FROM copies c WHERE r.target_kind = 'copy' AND c.id = r.target_id),
                 (SELECT po.hidden_at IS NOT NULL FROM posts po WHERE r.target_kind = 'post' AND po.id = r.target_id), false)
        FROM reports r JOIN users reporter ON reporter.id = r.reporter_id JOIN users owner ON owner.id = r.target_user_id
        """

    typealias RecordRow = (UUID, String, String, UUID, String, String, String?, String, Date, Date?, Int, Bool)

    static func record(_ r: RecordRow) -> ReportRecord {
        ReportRecord(id: r.0, reporter: r.1, targetKind: r.2, targetID: r.3, targetUser: r.4, reason: r.5, details: r.6,
                     status: r.7, createdAt: r.8, resolvedAt: r.9, openOnTarget: r.10, targetHidden: r.11)
    }

    /// Oldest first: the queue an admin works through.
    func list(status: String?, limit: Int) async throws -> [ReportRecord] {
        let rows = try await client.query("""
            SELECT \(unescaped: Self.recordColumns)
            WHERE \(status)::text IS NULL OR r.status = \(status)
            ORDER BY r.created_at, r.id LIMIT \(limit)
            """, logger: logger)
        var records: [ReportRecord] = []
        for try await row in rows.decode(RecordRow.self) { records.append(Self.record(row)) }
        return records
    }

    /// The report and every other report on the same target, oldest first.
    func withSiblings(_ id: UUID) async throws -> [ReportRecord] {
        let rows = try await client.query("""
            SELECT \(unescaped: Self.recordColumns)
            WHERE (r.target_kind, r.target_id) = (SELECT target_kind, target_id FROM reports WHERE id = \(id))
            ORDER BY r.id = \(id) DESC, r.created_at, r.id
            """, logger: logger)
        var records: [ReportRecord] = []
        for try await row in rows.decode(RecordRow.self) { records.append(Self.record(row)) }
        return records
    }

    /// Locks the report: (kind, target, owner, status).
    func lock(_ id: UUID, on connection: PostgresConnection) async throws -> (kind: String, target: UUID, owner: UUID, status: String)? {
        let rows = try await connection.query("""
            SELECT target_kind, target_id, target_user_id, status FROM reports WHERE id = \(id) FOR UPDATE
            """, logger: logger)
        for try await row in rows.decode((String, UUID, UUID, String).self) { return row }
        return nil
    }

    /// Closes every open report on the target; returns how many.
    func close(kind: String, targetID: UUID, status: String, at now: Date, on connection: PostgresConnection) async throws -> Int {
        let rows = try await connection.query("""
            UPDATE reports SET status = \(status), resolved_at = \(now)
            WHERE target_kind = \(kind) AND target_id = \(targetID) AND status = 'open'
            RETURNING id
            """, logger: logger)
        var closed = 0
        for try await _ in rows { closed += 1 }
        return closed
    }
}
