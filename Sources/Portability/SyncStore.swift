import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// SQL for the sync change log (`sync_changes`, moved forward by triggers; see 0013_sync.sql).
package struct SyncStore: Sendable {
    let client: Database
    let logger: Logger

    package init(client: Database, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// The log's state: its epoch, the purge mark, and the horizon below which every transaction has ended.
    static let state = "(SELECT bookworm_sync_epoch() AS epoch, purged_xid AS purged, bookworm_sync_horizon() AS horizon FROM sync_state)"

    /// The log's state and one page of `user`'s changes after `after`, oldest first. Only
    /// transactions older than the oldest one of this database still running are served
    /// (`bookworm_sync_horizon`, 0027): all of those have ended, so none that commits later can
    /// land behind the page.
    func page(user: UUID, after: SyncToken, limit: Int) async throws
        -> (epoch: String, purged: UInt64, horizon: UInt64, rows: [SyncChangeRow])
    {
        let rows = try await client.query("""
            SELECT s.epoch, s.purged::text, s.horizon::text, c.kind, c.object_id, c.xid::text, c.id
            FROM \(unescaped: Self.state) s
            LEFT JOIN LATERAL (
                SELECT kind, object_id, xid, id FROM sync_changes
                WHERE user_id = \(user) AND (xid, id) > (\(String(after.xid))::xid8, \(after.id)) AND xid < s.horizon
                ORDER BY xid, id
                LIMIT \(limit)
            ) c ON true
            ORDER BY c.xid, c.id
            """, logger: logger)
        var state: (epoch: String, purged: UInt64, horizon: UInt64)?
        var changes: [SyncChangeRow] = []
        for try await row in rows.decode((String, String, String, String?, UUID?, String?, Int64?).self) {
            state = (row.0, UInt64(row.1) ?? 0, UInt64(row.2) ?? 0)
            if let kind = row.3, let object = row.4, let xid = row.5.flatMap(UInt64.init), let id = row.6 {
                changes.append(SyncChangeRow(kind: kind, objectID: object, xid: xid, id: id))
            }
        }
        guard let state else { throw AppError.unavailable("sync_state has no row") }
        return (state.epoch, state.purged, state.horizon, changes)
    }

    /// Where a caught-up sync would stand now: the horizon, every transaction below it ended.
    package func position() async throws -> SyncToken {
        let rows = try await client.query("SELECT bookworm_sync_epoch(), bookworm_sync_horizon()::text", logger: logger)
        guard let (epoch, horizon) = try rows.rows.first?.decode((String, String).self), let xid = UInt64(horizon) else {
            throw AppError.unavailable("no sync position")
        }
        return SyncToken(epoch: epoch, xid: xid, id: 0)
    }

    /// Where an event stream of `user` opened with `after` stands: the position now, whether
    /// anything of the user's changed since `after` (always, without one or with a token from
    /// another epoch or before a purge), and the newest transaction of the user's that has
    /// committed but is not yet below the horizon (its notification came before the stream).
    package func resume(user: UUID, after: SyncToken?) async throws -> (position: SyncToken, changed: Bool, waiting: UInt64?) {
        let from = after ?? .start
        let rows = try await client.query("""
            SELECT s.epoch, s.horizon::text, s.purged::text,
                   EXISTS (SELECT 1 FROM sync_changes
                           WHERE user_id = \(user) AND (xid, id) > (\(String(from.xid))::xid8, \(from.id)) AND xid < s.horizon),
                   (SELECT max(xid)::text FROM sync_changes WHERE user_id = \(user) AND xid >= s.horizon)
            FROM \(unescaped: Self.state) s
            """, logger: logger)
        guard let row = try rows.rows.first?.decode((String, String, String, Bool, String?).self), let horizon = UInt64(row.1) else {
            throw AppError.unavailable("no sync position")
        }
        let stale = after.map { $0.epoch != row.0 || $0.xid <= (UInt64(row.2) ?? 0) } ?? true
        return (SyncToken(epoch: row.0, xid: horizon, id: 0), stale || row.3, row.4.flatMap(UInt64.init))
    }

    /// Deletes tombstones older than `cutoff` and raises the purge mark past them, so a token
    /// from before them is refused instead of silently missing a deletion.
    @discardableResult
    package func purgeTombstones(before cutoff: Date) async throws -> Int {
        let rows = try await client.query("""
            WITH gone AS (DELETE FROM sync_changes WHERE op = 'delete' AND changed_at < \(cutoff) RETURNING xid),
                 mark AS (UPDATE sync_state SET purged_xid = greatest(purged_xid, (SELECT max(xid) FROM gone))
                          WHERE EXISTS (SELECT 1 FROM gone) RETURNING 1)
            SELECT count(*)::int8 FROM gone
            """, logger: logger)
        for try await count in rows.decode(Int64.self) { return Int(count) }
        return 0
    }
}
