/// The trade state machine as one table: the routes act through it, `GET /v1/trades/{id}`
/// lists the viewer's allowed actions from it, the README's table is printed from it
/// (`bookworm trades table`), and the tests walk every state × action × actor against it.
package enum TradeAction: String, CaseIterable, Sendable {
    case accept, decline, cancel, counter, confirm, `return`, expire
}

/// Who may take an action.
package enum TradeActor: String, Sendable {
    /// The participant who did not make the latest proposal (the owner, until the owner counters).
    case proposalReceiver = "participant who did not make the latest proposal"
    case either = "either participant"
    case owner = "owner"
    /// The service itself (the expiry job).
    case system = "the service (expiry job)"
}

/// What else happens, in the same transaction as the change of state.
package enum TradeEffect: String, Sendable {
    case reserveCopies = "both copies become reserved; every other open trade on either is declined (reason `reserved`)"
    case newProposal = "the offered copy changes; at most 2 per participant"
    case releaseCopies = "reserved copies become available again"
    case confirmHandover = "records this side's confirmation and mails the other; the state changes once both have confirmed, and both get a mail"
    case handOver = "gift: the copy moves to the requester; swap: both copies change owner; loan: the copy becomes lent"
    case returnCopy = "the lent copy is available again"
    case notifyOther = "the other participant gets a mail"
    case notifyBoth = "both participants get a mail"
}

package struct TradeTransition: Sendable {
    package let from: TradeState
    package let action: TradeAction
    package let actor: TradeActor
    package let kinds: Set<TradeKind>
    package let to: TradeState
    package let effects: [TradeEffect]
}

package enum TradeMachine {
    static let allKinds = Set(TradeKind.allCases)

    package static let table: [TradeTransition] = [
        .init(from: .requested, action: .accept, actor: .proposalReceiver, kinds: allKinds, to: .accepted,
              effects: [.reserveCopies, .notifyOther]),
        .init(from: .requested, action: .decline, actor: .proposalReceiver, kinds: allKinds, to: .declined, effects: [.notifyOther]),
        .init(from: .requested, action: .counter, actor: .proposalReceiver, kinds: [.swap], to: .requested,
              effects: [.newProposal, .notifyOther]),
        .init(from: .requested, action: .cancel, actor: .either, kinds: allKinds, to: .cancelled, effects: [.notifyOther]),
        .init(from: .requested, action: .expire, actor: .system, kinds: allKinds, to: .expired, effects: [.notifyBoth]),
        .init(from: .accepted, action: .confirm, actor: .either, kinds: allKinds, to: .completed,
              effects: [.confirmHandover, .handOver]),
        .init(from: .accepted, action: .cancel, actor: .either, kinds: allKinds, to: .cancelled,
              effects: [.releaseCopies, .notifyOther]),
        .init(from: .accepted, action: .expire, actor: .system, kinds: allKinds, to: .expired,
              effects: [.releaseCopies, .notifyBoth]),
        .init(from: .completed, action: .return, actor: .owner, kinds: [.loan], to: .returned,
              effects: [.returnCopy, .notifyOther]),
    ]

    /// The transition `role` may take (nil: the service itself), or nil when none is allowed.
    package static func transition(from state: TradeState, action: TradeAction, kind: TradeKind, role: TradeRole?,
                                   proposalBy: TradeRole) -> TradeTransition? {
        table.first { row in
            guard row.from == state, row.action == action, row.kinds.contains(kind) else { return false }
            switch (row.actor, role) {
            case (.system, nil): return true
            case (.either, .some): return true
            case (.owner, .owner?): return true
            case (.proposalReceiver, let role?): return role != proposalBy
            default: return false
            }
        }
    }

    /// What `role` may do now, in table order (`expire` is never a participant's).
    package static func actions(state: TradeState, kind: TradeKind, role: TradeRole, proposalBy: TradeRole) -> [TradeAction] {
        TradeAction.allCases.filter { transition(from: state, action: $0, kind: kind, role: role, proposalBy: proposalBy) != nil }
    }

    /// The table as Markdown, for the README.
    package static func markdown() -> String {
        var lines = ["| state | action | who | kinds | next state | also |", "|---|---|---|---|---|---|"]
        for row in table {
            let kinds = row.kinds == allKinds ? "all" : TradeKind.allCases.filter(row.kinds.contains).map(\.rawValue).joined(separator: ", ")
            lines.append("| \(row.from.rawValue) | \(row.action.rawValue) | \(row.actor.rawValue) | \(kinds) | \(row.to.rawValue) | "
                         + row.effects.map(\.rawValue).joined(separator: "; ") + " |")
        }
        return lines.joined(separator: "\n")
    }
}
