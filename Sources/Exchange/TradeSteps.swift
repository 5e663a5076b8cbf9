import BookwormCore
import Foundation
import PostgresNIO

/// The effects of one transition (`TradeMachine`'s last column), run inside the transaction
/// that locked the trade and its copies.
struct TradeSteps {
    let service: TradesService
    let trade: TradeRecord
    let locked: [UUID: LockedCopy]
    let role: TradeRole?
    let user: UUID?
    let now: Date
    let connection: PostgresConnection

    private var trades: TradesStore { service.trades }
    private var copies: TradeCopiesStore { service.copies }
    /// Who hears about it: the other participant, or both when the service acted.
    private var others: [TradeRole] { role.map { [$0.other] } ?? [.owner, .requester] }

    /// Both copies become reserved, and every other open trade on either is declined.
    func accept() async throws {
        guard let copyID = trade.copyID, let copy = locked[copyID], copy.status == "available", copy.ownerID == trade.ownerID else {
            throw AppError.conflict(code: "copy_unavailable", detail: "The copy is no longer available", field: "copy_id")
        }
        if trade.kind == .swap {
            guard let offeredID = trade.offeredCopyID, let offered = locked[offeredID], offered.status == "available",
                  offered.ownerID == trade.requesterID else {
                throw AppError.conflict(code: "copy_unavailable", detail: "The offered copy is no longer available", field: "offered_copy_id")
            }
        }
        try await copies.reserve(trade.copyIDs, for: trade.id, on: connection)
        let others = try await trades.lockOpenTrades(on: trade.copyIDs, except: trade.id, on: connection).map(\.id)
        try await trades.declineReserved(others, at: now, on: connection)
        try await service.mail.notify(.declinedReserved, trades: others, recipients: [.requester], on: connection)
        try await finish(.accepted, action: .accept, notice: .accepted)
    }

    /// Ends or moves the trade; a trade that held copies lets them go.
    func finish(_ state: TradeState, action: TradeAction, notice: TradeNotice) async throws {
        if trade.state == .accepted && state != .completed { try await copies.release(trade: trade.id, on: connection) }
        try await trades.setState(trade.id, state, at: now, expiresAt: service.expiry(state, from: now), on: connection)
        try await trades.addEvent(trade.id, action: action.rawValue, state: state, by: user, at: now, on: connection)
        try await tell(notice)
    }

    /// A new offered copy (always the requester's), by the side that did not propose last.
    func counter(_ offeredCopy: UUID?) async throws {
        guard let role, let offeredCopy else { throw AppError.invalid("offered_copy_id", "is required") }
        let used = role == .owner ? trade.ownerCounters : trade.requesterCounters
        guard used < 2 else {
            throw AppError.conflict(code: "counter_limit", detail: "Each side may counter at most twice", field: "offered_copy_id")
        }
        guard let copy = locked[offeredCopy], copy.ownerID == trade.requesterID, copy.status == "available" else {
            throw AppError.broken("offered_copy_id", "must be one of the requester's available copies")
        }
        guard offeredCopy != trade.offeredCopyID else { throw AppError.broken("offered_copy_id", "is the copy already offered") }
        try await trades.counter(trade.id, by: role, offeredCopy: copy, at: now, expiresAt: service.expiry(.requested, from: now),
                                 on: connection)
        try await trades.addEvent(trade.id, action: "counter", state: .requested, by: user, at: now, on: connection)
        try await tell(.countered)
    }

    /// Records this side's handover; once both have confirmed, the copies move (or the loan starts).
    func confirm() async throws {
        guard let role else { return }
        let mine = role == .owner ? trade.ownerConfirmed : trade.requesterConfirmed
        guard !mine else { return }
        let theirs = role == .owner ? trade.requesterConfirmed : trade.ownerConfirmed
        try await trades.confirm(trade.id, by: role, at: now, expiresAt: service.expiry(.accepted, from: now),
                                 on: connection)
        guard theirs else {
            try await trades.addEvent(trade.id, action: "confirm", state: .accepted, by: user, at: now, on: connection)
            try await service.mail.notify(.confirmed, trade: trade.id, recipients: others, on: connection)
            return
        }
        if let copyID = trade.copyID {
            switch trade.kind {
            case .gift:
                try await copies.transfer(copyID, from: trade.ownerID, to: trade.requesterID, kind: .gift, trade: trade.id, at: now, on: connection)
            case .swap:
                try await copies.transfer(copyID, from: trade.ownerID, to: trade.requesterID, kind: .swap, trade: trade.id, at: now, on: connection)
                if let offered = trade.offeredCopyID {
                    try await copies.transfer(offered, from: trade.requesterID, to: trade.ownerID, kind: .swap, trade: trade.id, at: now,
                                              on: connection)
                }
            case .loan:
                try await copies.lend(copyID, trade: trade.id, on: connection)
            }
        }
        try await copies.release(trade: trade.id, on: connection)
        try await trades.setState(trade.id, .completed, at: now, expiresAt: nil, on: connection)
        try await trades.addEvent(trade.id, action: "confirm", state: .completed, by: user, at: now, on: connection)
        try await service.mail.notify(.completed, trade: trade.id, recipients: [.owner, .requester], on: connection)
    }

    /// Notices a participant can repeat at will (a request, then its cancel, again and again)
    /// draw on the sender's notify budget; past it the step has happened, but no mail goes out.
    /// The rest happen at most once or twice a trade, and each trade cost its requester a request.
    private func tell(_ notice: TradeNotice) async throws {
        if let role, let user, [.cancelled, .declined, .countered].contains(notice) {
            guard try await service.budget.spend(from: user, to: trade.user(role.other), on: connection) else { return }
        }
        try await service.mail.notify(notice, trade: trade.id, recipients: others, on: connection)
    }

    func takeBack() async throws {
        if let copyID = trade.copyID { try await copies.takeBack(copyID, on: connection) }
        try await trades.setState(trade.id, .returned, at: now, expiresAt: nil, on: connection)
        try await trades.addEvent(trade.id, action: "return", state: .returned, by: user, at: now, on: connection)
        try await service.mail.notify(.returned, trade: trade.id, recipients: others, on: connection)
    }
}
