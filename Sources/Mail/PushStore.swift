import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// One push as the sender reads it: its job, and the device if it still exists.
struct PushJob: Sendable {
    let jobID: UUID
    let attempts: Int
    let provider: String
    let title: String
    let body: String
    let kind: String
    let objectID: String
    let collapseID: String?
    /// Nil once the device is gone (logged out, replaced, erased): the push is dropped.
    let device: Device?

    struct Device: Sendable {
        let id: UUID
        let token: String
        let sandbox: Bool
    }
}

/// SQL for pushes: each is a `push` row in `jobs` (one per device), so it is leased, retried
/// and shared among workers as all background work is.
package struct PushStore: Sendable {
    let client: Database
    package let logger: Logger

    package init(client: Database, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// One job per device of each recipient that wants the message's category, on `connection`'s
    /// transaction. Only devices of live sessions on `platforms`, and no suspended recipient.
    func enqueue(_ messages: [PushMessage], platforms: [String], now: Date, on connection: PostgresConnection) async throws -> [UUID] {
        let rows = try await connection.query("""
            INSERT INTO jobs (kind, key, run_at, payload)
            SELECT 'push', gen_random_uuid()::text, '-infinity',
                   jsonb_build_object('device', d.id, 'user', d.user_id, 'provider', d.platform, 'title', m.title, 'body', m.body,
                                      'kind', m.kind, 'id', m.object, 'collapse', NULLIF(m.collapse, ''))
            FROM unnest(\(messages.map(\.userID))::uuid[], \(messages.map(\.category))::text[], \(messages.map(\.title))::text[],
                        \(messages.map(\.body))::text[], \(messages.map(\.kind))::text[], \(messages.map(\.objectID))::uuid[],
                        \(messages.map { $0.collapseID ?? "" })::text[]) AS m(user_id, category, title, body, kind, object, collapse)
            JOIN users u ON u.id = m.user_id AND u.suspended_at IS NULL AND NOT (m.category = ANY(u.push_off))
            JOIN devices d ON d.user_id = m.user_id AND d.platform = ANY(\(platforms)::text[])
            JOIN sessions s ON s.id = d.session_id AND s.revoked_at IS NULL
                           AND s.idle_expires_at > \(now) AND s.absolute_expires_at > \(now)
            RETURNING id
            """, logger: logger)
        var ids: [UUID] = []
        for try await id in rows.decode(UUID.self) { ids.append(id) }
        return ids
    }

    /// The claimed pushes with their devices, and the jobs whose payload is not a push (written
    /// by hand or by another version): those can never be sent, so the caller drops them.
    func load(_ jobs: [ClaimedJob]) async throws -> (pushes: [PushJob], unreadable: [UUID]) {
        let attempts = Dictionary(jobs.map { ($0.id, $0.attempts) }, uniquingKeysWith: { first, _ in first })
        let rows = try await client.query("""
            SELECT j.id, j.payload->>'provider', j.payload->>'title', j.payload->>'body', j.payload->>'kind', j.payload->>'id',
                   j.payload->>'collapse', d.id, d.token, d.environment = 'sandbox'
            FROM jobs j LEFT JOIN devices d ON d.id = CASE WHEN jsonb_typeof(j.payload->'device') = 'string'
                                                             AND j.payload->>'device' ~* '^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$'
                                                           THEN (j.payload->>'device')::uuid END
                                       AND d.user_id::text = j.payload->>'user'
            WHERE j.id = ANY(\(jobs.map(\.id)))
            """, logger: logger)
        var loaded: [PushJob] = [], unreadable: [UUID] = []
        for try await row in rows.decode((UUID, String?, String?, String?, String?, String?, String?, UUID?, String?, Bool?).self) {
            guard let provider = row.1, let title = row.2, let body = row.3, let kind = row.4, let objectID = row.5 else {
                unreadable.append(row.0)
                continue
            }
            let device = row.7.flatMap { id in row.8.map { PushJob.Device(id: id, token: $0, sandbox: row.9 ?? false) } }
            loaded.append(PushJob(jobID: row.0, attempts: attempts[row.0] ?? 1, provider: provider, title: title, body: body,
                                  kind: kind, objectID: objectID, collapseID: row.6, device: device))
        }
        return (loaded, unreadable)
    }

    /// Devices the provider says no longer exist.
    func deleteDevices(_ ids: [UUID]) async throws {
        guard !ids.isEmpty else { return }
        try await client.query("DELETE FROM devices WHERE id = ANY(\(ids))", logger: logger)
    }
}
