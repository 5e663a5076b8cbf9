import Accounts
import BookwormCore
import Catalog
import Foundation
import Logging
import PostgresNIO

/// A copy locked for a trade's change.
struct LockedCopy: Sendable {
    let id: UUID
    let ownerID: UUID
    let bookID: UUID
    let status: String
    /// Not hidden by reports, owner not suspended: others may ask for it.
    let shown: Bool
}

/// SQL for trades: rows, events, counters and the copies they hold. Every write runs on the
/// caller's transaction; the service takes the locks in a fixed order (copies by id, then the
/// trade, then other trades on those copies).
struct TradesStore: Sendable {
    let client: Database
    let logger: Logger

    static let recordColumns = """
        t.id, t.kind, t.state, t.copy_id, t.offered_copy_id, t.requester_id, t.owner_id, t.proposal_by,
        t.requester_counters, t.owner_counters, t.requester_confirmed_at IS NOT NULL, t.owner_confirmed_at IS NOT NULL,
        t.completed_at, t.expires_at
        """

    static func records(_ rows: PostgresRowSequence) async throws -> [TradeRecord] {
        var records: [TradeRecord] = []
        for try await row in rows.decode((UUID, String, String, UUID?, UUID?, UUID, UUID, String, Int, Int, Bool, Bool, Date?, Date?).self) {
            records.append(TradeRecord(
                id: row.0, kind: TradeKind(rawValue: row.1) ?? .gift, state: TradeState(rawValue: row.2) ?? .cancelled,
                copyID: row.3, offeredCopyID: row.4, requesterID: row.5, ownerID: row.6,
                proposalBy: TradeRole(rawValue: row.7) ?? .requester, requesterCounters: row.8, ownerCounters: row.9,
                requesterConfirmed: row.10, ownerConfirmed: row.11, completedAt: row.12, expiresAt: row.13))
        }
        return records
    }

    /// Locks the copies in id order (every writer does, so two never wait on each other in a cycle).
    func lockCopies(_ ids: [UUID], on connection: PostgresConnection) async throws -> [UUID: LockedCopy] {
        guard !ids.isEmpty else { return [:] }
        let rows = try await connection.query("""
            SELECT c.id, c.owner_id, c.book_id, c.status, \(unescaped: Visibility.shown("c", owner: "owner_id"))
            FROM copies c WHERE c.id = ANY(\(ids)) ORDER BY c.id FOR UPDATE OF c
            """, logger: logger)
        var copies: [UUID: LockedCopy] = [:]
        for try await (id, owner, book, status, shown) in rows.decode((UUID, UUID, UUID, String, Bool).self) {
            copies[id] = LockedCopy(id: id, ownerID: owner, bookID: book, status: status, shown: shown)
        }
        return copies
    }

    /// The trade's copies as they are now, without a lock (to know which copies to lock first).
    func copyIDs(of id: UUID, on connection: PostgresConnection) async throws -> [UUID]? {
        let rows = try await connection.query("SELECT copy_id, offered_copy_id FROM trades WHERE id = \(id)", logger: logger)
        for try await (copy, offered) in rows.decode((UUID?, UUID?).self) { return [copy, offered].compactMap { $0 } }
        return nil
    }

    func lock(_ id: UUID, on connection: PostgresConnection) async throws -> TradeRecord? {
        try await Self.records(connection.query("SELECT \(unescaped: Self.recordColumns) FROM trades t WHERE t.id = \(id) FOR UPDATE",
                                                logger: logger)).first
    }

    /// Open trades that hold or offer any of `copies`, other than `except`, locked (after the copies).
    func lockOpenTrades(on copies: [UUID], except: UUID?, on connection: PostgresConnection) async throws -> [TradeRecord] {
        try await Self.records(connection.query("""
            SELECT \(unescaped: Self.recordColumns) FROM trades t
            WHERE (t.copy_id = ANY(\(copies)) OR t.offered_copy_id = ANY(\(copies)))
              AND t.state IN ('requested', 'accepted') AND t.id IS DISTINCT FROM \(except)
            ORDER BY t.id FOR UPDATE
            """, logger: logger))
    }

    /// Open trades between two users (blocking one cancels them); locked unless `lock` is false.
    func openTrades(between first: UUID, and second: UUID, lock: Bool, on connection: PostgresConnection) async throws -> [TradeRecord] {
        try await Self.records(connection.query("""
            SELECT \(unescaped: Self.recordColumns) FROM trades t
            WHERE ((t.owner_id = \(first) AND t.requester_id = \(second)) OR (t.owner_id = \(second) AND t.requester_id = \(first)))
              AND t.state IN ('requested', 'accepted')
            ORDER BY t.id \(unescaped: lock ? "FOR UPDATE" : "")
            """, logger: logger))
    }

    /// Every open trade `user` takes part in (account deletion cancels them); locked unless `lock` is false.
    func openTrades(of user: UUID, lock: Bool, on connection: PostgresConnection) async throws -> [TradeRecord] {
        try await Self.records(connection.query("""
            SELECT \(unescaped: Self.recordColumns) FROM trades t
            WHERE (t.owner_id = \(user) OR t.requester_id = \(user)) AND t.state IN ('requested', 'accepted')
            ORDER BY t.id \(unescaped: lock ? "FOR UPDATE" : "")
            """, logger: logger))
    }

    /// Whether a block stands between the two, and whether the requester already has an open
    /// trade for the copy: one statement, run under the copy's lock.
    func requestChecks(requester: UUID, owner: UUID, copy: UUID, on connection: PostgresConnection) async throws -> (blocked: Bool, open: Bool) {
        let rows = try await connection.query("""
            SELECT EXISTS (SELECT 1 FROM blocks
                           WHERE (blocker_id = \(requester) AND blocked_id = \(owner)) OR (blocker_id = \(owner) AND blocked_id = \(requester))),
                   EXISTS (SELECT 1 FROM trades
                           WHERE requester_id = \(requester) AND copy_id = \(copy) AND state IN ('requested', 'accepted'))
            """, logger: logger)
        for try await (blocked, open) in rows.decode((Bool, Bool).self) { return (blocked, open) }
        return (false, false)
    }

    /// The trade and its first event ("request") in one statement.
    func insert(_ trade: NewTrade, requester: UUID, owner: UUID, bookID: UUID, offeredBookID: UUID?, now: Date, expiresAt: Date?,
                on connection: PostgresConnection) async throws -> UUID {
        let rows = try await connection.query("""
            WITH t AS (
                INSERT INTO trades (kind, copy_id, offered_copy_id, book_id, offered_book_id, requester_id, owner_id, due_on, message,
                                    created_at, updated_at, expires_at)
                VALUES (\(trade.kind.rawValue), \(trade.copyID), \(trade.offeredCopyID), \(bookID), \(offeredBookID), \(requester), \(owner),
                        \(trade.dueOn.map(Self.dateString))::date, \(trade.message), \(now), \(now), \(expiresAt))
                RETURNING id
            ), e AS (
                INSERT INTO trade_events (trade_id, seq, action, state, by_id, at) SELECT id, 1, 'request', 'requested', \(requester), \(now) FROM t
            )
            SELECT id FROM t
            """, logger: logger)
        for try await id in rows.decode(UUID.self) { return id }
        throw AppError.unavailable("trade insert returned no row")
    }

    func addEvent(_ trade: UUID, action: String, state: TradeState, by: UUID?, at: Date, on connection: PostgresConnection) async throws {
        try await connection.query("""
            INSERT INTO trade_events (trade_id, seq, action, state, by_id, at)
            SELECT \(trade), coalesce(max(seq), 0) + 1, \(action), \(state.rawValue), \(by), \(at) FROM trade_events WHERE trade_id = \(trade)
            """, logger: logger)
    }

    /// Declines `ids` because their copy went to another trade: one update, one insert.
    func declineReserved(_ ids: [UUID], at now: Date, on connection: PostgresConnection) async throws {
        guard !ids.isEmpty else { return }
        try await connection.query("""
            UPDATE trades SET state = 'declined', decline_reason = 'reserved', updated_at = \(now), expires_at = NULL
            WHERE id = ANY(\(ids))
            """, logger: logger)
        try await connection.query("""
            INSERT INTO trade_events (trade_id, seq, action, state, by_id, at)
            SELECT t.id, coalesce((SELECT max(seq) FROM trade_events e WHERE e.trade_id = t.id), 0) + 1, 'decline', 'declined', NULL, \(now)
            FROM unnest(\(ids)::uuid[]) AS t(id)
            """, logger: logger)
    }

    /// The new state and activity time; the expiry window restarts while the trade is open.
    func setState(_ id: UUID, _ state: TradeState, at now: Date, expiresAt: Date?, declineReason: String? = nil,
                  on connection: PostgresConnection) async throws {
        try await connection.query("""
            UPDATE trades SET state = \(state.rawValue), updated_at = \(now), expires_at = \(expiresAt),
                              decline_reason = coalesce(\(declineReason), decline_reason),
                              completed_at = CASE WHEN \(state.rawValue) = 'completed' THEN \(now) ELSE completed_at END
            WHERE id = \(id)
            """, logger: logger)
    }

    func counter(_ id: UUID, by role: TradeRole, offeredCopy: LockedCopy, at now: Date, expiresAt: Date?,
                 on connection: PostgresConnection) async throws {
        try await connection.query("""
            UPDATE trades SET offered_copy_id = \(offeredCopy.id), offered_book_id = \(offeredCopy.bookID), proposal_by = \(role.rawValue),
                requester_counters = requester_counters + CASE WHEN \(role.rawValue) = 'requester' THEN 1 ELSE 0 END,
                owner_counters = owner_counters + CASE WHEN \(role.rawValue) = 'owner' THEN 1 ELSE 0 END,
                updated_at = \(now), expires_at = \(expiresAt)
            WHERE id = \(id)
            """, logger: logger)
        try await connection.query("""
            INSERT INTO trade_counters (trade_id, seq, by_role, offered_copy_id, at)
            SELECT \(id), coalesce(max(seq), 0) + 1, \(role.rawValue), \(offeredCopy.id), \(now) FROM trade_counters WHERE trade_id = \(id)
            """, logger: logger)
    }

    func confirm(_ id: UUID, by role: TradeRole, at now: Date, expiresAt: Date?, on connection: PostgresConnection) async throws {
        try await connection.query("""
            UPDATE trades SET
                requester_confirmed_at = CASE WHEN \(role.rawValue) = 'requester' THEN \(now) ELSE requester_confirmed_at END,
                owner_confirmed_at = CASE WHEN \(role.rawValue) = 'owner' THEN \(now) ELSE owner_confirmed_at END,
                updated_at = \(now), expires_at = \(expiresAt)
            WHERE id = \(id)
            """, logger: logger)
    }

    static func dateString(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        return formatter.string(from: date)
    }
}
