import BookwormCore
import Catalog
import Foundation
import Logging
import PostgresNIO

/// Which of my trades a list shows.
package enum TradeListRole: String, Sendable {
    /// Trades on my copies.
    case incoming
    /// Trades I asked for.
    case outgoing
}

/// Reads trades as their participants see them, with their counters and events.
struct TradeViewsStore: Sendable {
    let client: Database
    let logger: Logger

    static let columns = """
        t.id, t.kind, t.state, t.copy_id, c.condition, b.id, b.isbn13, b.title, b.authors,
        t.offered_copy_id, oc.condition, ob.id, ob.isbn13, ob.title, ob.authors,
        r.id, r.username, r.display_name, o.id, o.username, o.display_name,
        t.due_on::text, t.message, t.decline_reason, t.proposal_by,
        t.created_at, t.updated_at, t.expires_at, t.completed_at, (EXTRACT(EPOCH FROM t.updated_at) * 1000000)::int8,
        t.owner_waiting, t.requester_waiting
        """
    static let joins = """
        JOIN books b ON b.id = t.book_id LEFT JOIN copies c ON c.id = t.copy_id
        LEFT JOIN books ob ON ob.id = t.offered_book_id LEFT JOIN copies oc ON oc.id = t.offered_copy_id
        JOIN users r ON r.id = t.requester_id JOIN users o ON o.id = t.owner_id
        """

    /// The trade if `viewer` takes part in it; nil otherwise (a stranger learns nothing, not even that it exists).
    func view(_ id: UUID, viewer: UUID, on connection: PostgresConnection? = nil) async throws -> TradeView? {
        try await views([id], viewer: viewer, on: connection).first
    }

    /// The trades among `ids` that `viewer` takes part in, in the order of `ids`, with their
    /// counters and events. Three prepared statements, whatever the page's length: planning the
    /// seven-table join cost ten times what running it did.
    func views(_ ids: [UUID], viewer: UUID, on connection: PostgresConnection?) async throws -> [TradeView] {
        guard !ids.isEmpty else { return [] }
        let rows = try await client.execute(TradeViewSQL(values: [.uuidArray(ids), .uuid(viewer)]), on: connection, logger: logger)
        let byID = Dictionary(try Self.views(rows, viewer: viewer).map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        return try await complete(ids.compactMap { byID[$0] }, on: connection)
    }

    /// My trades, what waits for me first, then the latest activity first (keyset pages: each
    /// side is one index range, `trades_owner_list_idx` / `trades_requester_list_idx`).
    func list(viewer: UUID, role: TradeListRole?, state: TradeState?, after: Cursor?, limit: Int) async throws -> [TradeView] {
        let afterWaiting = after.map { $0.micros & TradeView.waitingBit != 0 }
        // Any 32 characters decode: keep the time inside what SQL time arithmetic accepts.
        let afterMicros = after.map { Int(min(max($0.micros & ~TradeView.waitingBit, Cursor.microsRange.lowerBound), Cursor.microsRange.upperBound)) }
        let incoming = role != .outgoing, outgoing = role != .incoming
        let rows = try await client.query("""
            WITH mine AS (
                (SELECT t.id, t.owner_waiting AS waiting, t.updated_at FROM trades t
                 WHERE \(incoming) AND t.owner_id = \(viewer) AND (\(state?.rawValue)::text IS NULL OR t.state = \(state?.rawValue))
                   AND (\(afterWaiting)::bool IS NULL OR (t.owner_waiting, t.updated_at, t.id)
                        < (\(afterWaiting), timestamptz 'epoch' + \(afterMicros) * interval '1 microsecond', \(after?.id)))
                 ORDER BY t.owner_waiting DESC, t.updated_at DESC, t.id DESC LIMIT \(limit))
                UNION ALL
                (SELECT t.id, t.requester_waiting, t.updated_at FROM trades t
                 WHERE \(outgoing) AND t.requester_id = \(viewer) AND (\(state?.rawValue)::text IS NULL OR t.state = \(state?.rawValue))
                   AND (\(afterWaiting)::bool IS NULL OR (t.requester_waiting, t.updated_at, t.id)
                        < (\(afterWaiting), timestamptz 'epoch' + \(afterMicros) * interval '1 microsecond', \(after?.id)))
                 ORDER BY t.requester_waiting DESC, t.updated_at DESC, t.id DESC LIMIT \(limit))
            )
            SELECT id FROM mine ORDER BY waiting DESC, updated_at DESC, id DESC LIMIT \(limit)
            """, logger: logger)
        var ids: [UUID] = []
        for try await id in rows.decode(UUID.self) { ids.append(id) }
        return try await views(ids, viewer: viewer, on: nil)
    }

    /// Adds counters and events: two statements for a whole page.
    private func complete(_ views: [TradeView], on connection: PostgresConnection?) async throws -> [TradeView] {
        guard !views.isEmpty else { return [] }
        let ids = views.map(\.id)
        var counters: [UUID: [CounterView]] = [:]
        var events: [UUID: [TradeEventView]] = [:]
        for row in try await client.execute(TradeCountersSQL(values: [.uuidArray(ids)]), on: connection, logger: logger) {
            let (trade, by, copy, at) = try row.decode((UUID, String, UUID?, Date).self)
            counters[trade, default: []].append(CounterView(by: by, offeredCopyID: copy, at: at))
        }
        for row in try await client.execute(TradeEventsSQL(values: [.uuidArray(ids)]), on: connection, logger: logger) {
            let (trade, action, state, at, by) = try row.decode((UUID, String, String, Date, String?).self)
            events[trade, default: []].append(TradeEventView(action: action, state: state, at: at, by: by))
        }
        return views.map { view in
            var view = view
            view.counters = counters[view.id] ?? []
            view.events = events[view.id] ?? []
            return view
        }
    }

    private static func views(_ rows: [PostgresRow], viewer: UUID) throws -> [TradeView] {
        try rows.map { row in
            let c = row.makeRandomAccess()
            let kind = try c[1].decode(String.self), state = try c[2].decode(String.self)
            let requester = OwnerSummary(id: try c[15].decode(UUID.self), username: try c[16].decode(String.self),
                                         displayName: try c[17].decode(String?.self))
            let owner = OwnerSummary(id: try c[18].decode(UUID.self), username: try c[19].decode(String.self),
                                     displayName: try c[20].decode(String?.self))
            let role: TradeRole = viewer == owner.id ? .owner : .requester
            let proposalBy = TradeRole(rawValue: try c[24].decode(String.self)) ?? .requester
            let offeredBook = try c[11].decode(UUID?.self)
            let actions = TradeMachine.actions(state: TradeState(rawValue: state) ?? .cancelled, kind: TradeKind(rawValue: kind) ?? .gift,
                                               role: role, proposalBy: proposalBy)
            return TradeView(
                id: try c[0].decode(UUID.self), kind: kind, state: state,
                copy: TradeCopy(id: try c[3].decode(UUID?.self), condition: try c[4].decode(String?.self),
                                book: BookSummary(id: try c[5].decode(UUID.self), isbn13: try c[6].decode(String?.self),
                                                  title: try c[7].decode(String.self), authors: try c[8].decode([String].self))),
                offeredCopy: try offeredBook.map { bookID in
                    TradeCopy(id: try c[9].decode(UUID?.self), condition: try c[10].decode(String?.self),
                              book: BookSummary(id: bookID, isbn13: try c[12].decode(String?.self), title: try c[13].decode(String.self),
                                                authors: try c[14].decode([String].self)))
                },
                requester: requester, owner: owner, dueOn: try c[21].decode(String?.self), message: try c[22].decode(String?.self),
                declineReason: try c[23].decode(String?.self), proposalBy: proposalBy.rawValue, counters: [], events: [],
                actions: actions.map(\.rawValue), waiting: try c[role == .owner ? 30 : 31].decode(Bool.self),
                createdAt: try c[25].decode(Date.self), updatedAt: try c[26].decode(Date.self), expiresAt: try c[27].decode(Date?.self),
                completedAt: try c[28].decode(Date?.self), sortMicros: try c[29].decode(Int64.self))
        }
    }
}

/// The trades of a page (or one), for a viewer who takes part in them.
struct TradeViewSQL: PreparedSQL {
    static let name = "bookworm_trade_view"
    static let sql = """
        SELECT \(TradeViewsStore.columns) FROM trades t \(TradeViewsStore.joins)
        WHERE t.id = ANY($1::uuid[]) AND $2::uuid IN (t.owner_id, t.requester_id)
        """
    let values: [SQLValue]
}

struct TradeCountersSQL: PreparedSQL {
    static let name = "bookworm_trade_counters"
    static let sql = """
        SELECT tc.trade_id, CASE tc.by_role WHEN 'owner' THEN o.username ELSE r.username END, tc.offered_copy_id, tc.at
        FROM trade_counters tc JOIN trades t ON t.id = tc.trade_id
        JOIN users o ON o.id = t.owner_id JOIN users r ON r.id = t.requester_id
        WHERE tc.trade_id = ANY($1::uuid[]) ORDER BY tc.trade_id, tc.seq
        """
    let values: [SQLValue]
}

struct TradeEventsSQL: PreparedSQL {
    static let name = "bookworm_trade_events"
    static let sql = """
        SELECT e.trade_id, e.action, e.state, e.at, u.username FROM trade_events e LEFT JOIN users u ON u.id = e.by_id
        WHERE e.trade_id = ANY($1::uuid[]) ORDER BY e.trade_id, e.seq
        """
    let values: [SQLValue]
}
