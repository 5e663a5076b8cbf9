import Accounts
import BookwormCore
import Foundation
import Logging
import Mail
import PostgresNIO

/// The trade use cases. Every write is one transaction that locks in one fixed order: the
/// copies involved (by id), then the trade, then other open trades on those copies. So two
/// accepts, an accept and a cancel, or an accept and a copy's deletion serialise on the copy
/// rows and never deadlock; `copy_reservations` refuses a second accepted trade on a copy anyway.
package struct TradesService: Sendable {
    let client: Database
    let trades: TradesStore
    let copies: TradeCopiesStore
    let views: TradeViewsStore
    let blocks: BlocksStore
    let mail: TradeMail
    let budget: NotifyBudget
    let policy: TradePolicy
    let clock: any AppClock
    let logger: Logger

    package init(client: Database, outbox: OutboxStore, push: PushQueue, templates: MailTemplates, policy: TradePolicy,
                 notify: NotifyPolicy, clock: any AppClock, logger: Logger) {
        self.client = client
        self.trades = TradesStore(client: client, logger: logger)
        self.copies = TradeCopiesStore(client: client, logger: logger)
        self.views = TradeViewsStore(client: client, logger: logger)
        self.blocks = BlocksStore(client: client, logger: logger)
        self.mail = TradeMail(outbox: outbox, push: push, templates: templates, logger: logger)
        self.budget = NotifyBudget(throttles: ThrottleStore(client: client, logger: logger, clock: clock), policy: notify)
        self.policy = policy
        self.clock = clock
        self.logger = logger
    }

    /// The trades among `ids` that `viewer` takes part in, as `GET /v1/me/trades/{id}` shows them (delta sync).
    package func views(_ ids: [UUID], viewer: UUID) async throws -> [UUID: TradeView] {
        Dictionary(try await views.views(ids, viewer: viewer, on: nil).map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    package func request(_ new: NewTrade, by requester: UserRecord) async throws -> TradeView {
        guard requester.emailVerifiedAt != nil else {
            throw AppError.forbiddenCode("email_not_verified", "Verify your email address before asking for a book")
        }
        // The trade is read back after commit, so the copy's lock is held for the writes only.
        let id = try await client.transaction(logger: logger) { connection in
            let now = clock.now()
            let locked = try await trades.lockCopies([new.copyID] + [new.offeredCopyID].compactMap { $0 }, on: connection)
            guard let copy = locked[new.copyID], (copy.status != "withdrawn" && copy.shown) || copy.ownerID == requester.id else {
                throw AppError.notFound("No copy with id \(new.copyID.apiString)")
            }
            guard copy.ownerID != requester.id else { throw AppError.broken("copy_id", "is your own copy") }
            let checks = try await trades.requestChecks(requester: requester.id, owner: copy.ownerID, copy: copy.id, on: connection)
            guard !checks.blocked else { throw AppError.forbiddenCode("blocked", "You cannot trade with this user") }
            guard copy.status == "available" else {
                throw AppError.conflict(code: "copy_unavailable", detail: "The copy is \(copy.status)", field: "copy_id")
            }
            let offered = try new.offeredCopyID.map { id in
                guard let offered = locked[id], offered.ownerID == requester.id, offered.status == "available" else {
                    throw AppError.broken("offered_copy_id", "must be one of your available copies")
                }
                return offered
            }
            guard !checks.open else { throw Self.alreadyOpen }
            // A request exists to notify the owner: past the requester's budget it is refused whole.
            try await budget.charge(from: requester.id, to: copy.ownerID, on: connection)
            let id: UUID
            do {
                id = try await trades.insert(new, requester: requester.id, owner: copy.ownerID, bookID: copy.bookID,
                                             offeredBookID: offered?.bookID, now: now, expiresAt: expiry(.requested, from: now),
                                             on: connection)
            } catch let error as PSQLError where error.sqlState == "23505" {
                throw Self.alreadyOpen
            }
            try await mail.notify(.requested, trade: id, recipients: [.owner], on: connection)
            return id
        }
        return try await get(id, viewer: requester.id)
    }

    static let alreadyOpen = AppError.conflict(code: "trade_exists", detail: "You already have an open trade for this copy", field: "copy_id")

    package func get(_ id: UUID, viewer: UUID) async throws -> TradeView {
        guard let view = try await views.view(id, viewer: viewer) else { throw Self.notFound(id) }
        return view
    }

    package func list(viewer: UUID, role: TradeListRole?, state: TradeState?, after: Cursor?, limit: Int) async throws -> Page<TradeView> {
        let rows = try await views.list(viewer: viewer, role: role, state: state, after: after, limit: limit + 1)
        let visible = Array(rows.prefix(limit))
        return Page(data: visible, nextCursor: rows.count > limit ? visible.last?.cursor.encoded : nil)
    }

    /// A participant's action (`by` nil: the service's own, i.e. expiry).
    package func act(_ action: TradeAction, on id: UUID, by user: UUID?, offeredCopy: UUID? = nil) async throws -> TradeView? {
        let acted = try await client.transaction(logger: logger) { connection in
            let now = clock.now()
            let (trade, locked) = try await lockTrade(id, extra: offeredCopy, on: connection)
            let role = try user.map { user in
                guard let role = trade.role(of: user) else { throw Self.notFound(id) }
                return role
            }
            // The sweep read the trade without a lock: under the lock it may have moved on.
            if action == .expire, !trade.state.isOpen || !(trade.expiresAt.map { $0 <= now } ?? false) { return false }
            guard TradeMachine.transition(from: trade.state, action: action, kind: trade.kind, role: role,
                                          proposalBy: trade.proposalBy) != nil else {
                throw AppError.invalidTransition(state: trade.state.rawValue, action: action.rawValue)
            }
            let steps = TradeSteps(service: self, trade: trade, locked: locked, role: role, user: user, now: now, connection: connection)
            switch action {
            case .accept: try await steps.accept()
            case .decline: try await steps.finish(.declined, action: action, notice: .declined)
            case .cancel: try await steps.finish(.cancelled, action: action, notice: .cancelled)
            case .counter: try await steps.counter(offeredCopy)
            case .confirm: try await steps.confirm()
            case .return: try await steps.takeBack()
            case .expire: try await steps.finish(.expired, action: action, notice: .expired)
            }
            return true
        }
        guard acted, let user else { return nil }
        return try await get(id, viewer: user)
    }

    /// Locks the trade's copies (and `extra`), then the trade. A counter may have changed the
    /// offered copy between reading its ids and locking: then the copies are read again.
    private func lockTrade(_ id: UUID, extra: UUID?, on connection: PostgresConnection) async throws -> (TradeRecord, [UUID: LockedCopy]) {
        for _ in 0..<3 {
            guard let ids = try await trades.copyIDs(of: id, on: connection) else { throw Self.notFound(id) }
            let locked = try await trades.lockCopies(ids + [extra].compactMap { $0 }, on: connection)
            guard let trade = try await trades.lock(id, on: connection) else { throw Self.notFound(id) }
            if Set(trade.copyIDs).isSubset(of: Set(ids)) {
                return (trade, locked)
            }
        }
        throw AppError.conflict(code: "busy", detail: "The trade changed while you acted; try again", field: nil)
    }

    func expiry(_ state: TradeState, from now: Date) -> Date? {
        switch state {
        case .requested: now.addingTimeInterval(policy.requestedDays * 86400)
        case .accepted: now.addingTimeInterval(policy.acceptedDays * 86400)
        default: nil
        }
    }

    static func notFound(_ id: UUID) -> AppError { .notFound("No trade with id \(id.apiString)") }
}
