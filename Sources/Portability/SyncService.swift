import Accounts
import BookwormCore
import Catalog
import Discovery
import Exchange
import Foundation
import Logging
import Places

/// Delta sync: a page of the change log, each object rendered as its GET shows it to its owner,
/// or as a tombstone when it is gone or no longer mine.
package struct SyncService: Sendable {
    let log: SyncStore
    let owned: OwnedViews
    let policy: SyncPolicy
    let clock: any AppClock

    package init(client: Database, readings: ReadingsService, wishes: WishesService, trades: TradesService,
                 policy: SyncPolicy, clock: any AppClock, logger: Logger) {
        self.log = SyncStore(client: client, logger: logger)
        self.owned = OwnedViews(client: client, readings: readings, wishes: wishes, trades: trades, logger: logger)
        self.policy = policy
        self.clock = clock
    }

    /// Without `since`: everything of mine, from the log's start. A token of another data epoch,
    /// or from before tombstones were purged, is 410 `sync_token_expired`.
    func changes(user: UUID, since: SyncToken?, limit: Int) async throws -> SyncPage {
        let page = try await log.page(user: user, after: since ?? .start, limit: limit + 1)
        if let since, since.epoch != page.epoch || since.xid <= page.purged {
            throw AppError.gone(code: "sync_token_expired",
                                detail: "This sync token is too old or from another copy of the data: sync again without since",
                                field: "since")
        }
        let rows = Array(page.rows.prefix(limit))
        let hasMore = page.rows.count > limit
        // Caught up: everything below the horizon is served, and no later change can land below it.
        let next = hasMore
            ? SyncToken(epoch: page.epoch, xid: rows.last?.xid ?? 0, id: rows.last?.id ?? 0)
            : SyncToken(epoch: page.epoch, xid: max(page.horizon, since?.xid ?? 0), id: 0)
        return SyncPage(changes: try await render(rows, user: user), next: next.encoded, hasMore: hasMore)
    }

    /// Each kind is read in one statement for the whole page.
    private func render(_ rows: [SyncChangeRow], user: UUID) async throws -> [SyncChange] {
        let ids = Dictionary(grouping: rows, by: \.kind).mapValues { $0.map(\.objectID) }
        var views: [String: [UUID: any Encodable & Sendable]] = [:]
        for (kind, objects) in ids {
            views[kind] = try await owned.views(kind: kind, ids: objects, user: user)
        }
        return rows.map { row in
            if let view = views[row.kind]?[row.objectID] {
                return SyncChange(type: row.kind, id: row.objectID, op: "upsert", data: view)
            }
            return SyncChange(type: row.kind, id: row.objectID, op: "delete", data: nil)
        }
    }
}
