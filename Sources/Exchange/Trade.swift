import BookwormCore
import Catalog
import Foundation

package enum TradeKind: String, CaseIterable, Sendable {
    case gift, swap, loan
}

package enum TradeState: String, CaseIterable, Sendable {
    case requested, accepted, declined, cancelled, expired, completed, returned

    /// Open trades hold a copy: one per requester and copy, and the copy cannot be deleted.
    var isOpen: Bool { self == .requested || self == .accepted }
}

package enum TradeRole: String, Sendable {
    case requester, owner
    var other: TradeRole { self == .owner ? .requester : .owner }
}

/// `POST /v1/trades`.
package struct CreateTradeBody: StrictBody {
    let copyID: UUID
    let kind: String
    let offeredCopyID: UUID?
    let dueOn: String?
    let message: String?

    package enum CodingKeys: String, CodingKey, CaseIterable {
        case kind, message
        case copyID = "copy_id", offeredCopyID = "offered_copy_id", dueOn = "due_on"
    }
}

package struct CounterBody: StrictBody {
    let offeredCopyID: UUID
    package enum CodingKeys: String, CodingKey, CaseIterable { case offeredCopyID = "offered_copy_id" }
}

package struct RatingBody: StrictBody {
    let score: Int
    let comment: String?
    package enum CodingKeys: String, CodingKey, CaseIterable { case score, comment }
}

/// A validated request for a copy.
package struct NewTrade: Sendable {
    let copyID: UUID
    let kind: TradeKind
    let offeredCopyID: UUID?
    /// Days since 1970-01-01 (a calendar date, no time zone).
    let dueOn: Date?
    let message: String?
}

/// A trade's row, as the service reasons about it.
struct TradeRecord: Sendable {
    let id: UUID
    let kind: TradeKind
    let state: TradeState
    let copyID: UUID?
    let offeredCopyID: UUID?
    let requesterID: UUID
    let ownerID: UUID
    let proposalBy: TradeRole
    let requesterCounters: Int
    let ownerCounters: Int
    let requesterConfirmed: Bool
    let ownerConfirmed: Bool
    let completedAt: Date?
    let expiresAt: Date?

    func role(of user: UUID) -> TradeRole? {
        user == ownerID ? .owner : user == requesterID ? .requester : nil
    }

    func user(_ role: TradeRole) -> UUID { role == .owner ? ownerID : requesterID }

    /// The copies the trade holds or would hold, in lock order.
    var copyIDs: [UUID] { [copyID, offeredCopyID].compactMap { $0 }.sorted { $0.uuidString < $1.uuidString } }
}

/// A copy as a trade shows it: its book survives the copy's deletion.
struct TradeCopy: Encodable, Sendable {
    let id: UUID?
    let condition: String?
    let book: BookSummary

    enum CodingKeys: String, CodingKey { case id, condition, book }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id?.apiString, forKey: .id)
        try container.encode(condition, forKey: .condition)
        try container.encode(book, forKey: .book)
    }
}

struct TradeEventView: Encodable, Sendable {
    let action: String
    let state: String
    let at: Date
    /// Username; null when the service itself acted (expiry, a decline because the copy was reserved).
    let by: String?

    enum CodingKeys: String, CodingKey { case action, state, at, by }
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(action, forKey: .action)
        try c.encode(state, forKey: .state)
        try c.encode(at, forKey: .at)
        try c.encode(by, forKey: .by)
    }
}

struct CounterView: Encodable, Sendable {
    let by: String
    let offeredCopyID: UUID?
    let at: Date

    enum CodingKeys: String, CodingKey { case by, at, offeredCopyID = "offered_copy_id" }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(by, forKey: .by)
        try container.encode(offeredCopyID?.apiString, forKey: .offeredCopyID)
        try container.encode(at, forKey: .at)
    }
}

/// A trade as its participants see it (API.md, Trades). `actions` lists what the viewer may do
/// now, read from `TradeMachine`, so a client need not copy the rules.
package struct TradeView: Encodable, Sendable {
    let id: UUID
    let kind: String
    let state: String
    let copy: TradeCopy
    let offeredCopy: TradeCopy?
    let requester: OwnerSummary
    let owner: OwnerSummary
    let dueOn: String?
    let message: String?
    let declineReason: String?
    let proposalBy: String
    var counters: [CounterView]
    var events: [TradeEventView]
    var actions: [String]
    var waiting: Bool
    let createdAt: Date
    let updatedAt: Date
    let expiresAt: Date?
    let completedAt: Date?
    let sortMicros: Int64

    var cursor: Cursor { Cursor(micros: (waiting ? TradeView.waitingBit : 0) | sortMicros, id: id) }
    /// The cursor's position carries "waiting for me" in a high bit above the time.
    static let waitingBit: Int64 = 1 << 61

    enum CodingKeys: String, CodingKey {
        case id, kind, state, copy, requester, owner, message, counters, events, actions, waiting
        case offeredCopy = "offered_copy", dueOn = "due_on", declineReason = "decline_reason", proposalBy = "proposal_by"
        case createdAt = "created_at", updatedAt = "updated_at", expiresAt = "expires_at", completedAt = "completed_at"
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id.apiString, forKey: .id)
        try c.encode(kind, forKey: .kind)
        try c.encode(state, forKey: .state)
        try c.encode(copy, forKey: .copy)
        try c.encode(offeredCopy, forKey: .offeredCopy)
        try c.encode(requester, forKey: .requester)
        try c.encode(owner, forKey: .owner)
        try c.encode(dueOn, forKey: .dueOn)
        try c.encode(message, forKey: .message)
        try c.encode(declineReason, forKey: .declineReason)
        try c.encode(proposalBy, forKey: .proposalBy)
        try c.encode(counters, forKey: .counters)
        try c.encode(events, forKey: .events)
        try c.encode(actions, forKey: .actions)
        try c.encode(waiting, forKey: .waiting)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(updatedAt, forKey: .updatedAt)
        try c.encode(expiresAt, forKey: .expiresAt)
        try c.encode(completedAt, forKey: .completedAt)
    }
}

/// One entry of a copy's journey: an owner, since when, and how they got it.
package struct JourneyStep: Encodable, Sendable {
    /// Null once that owner's account is gone.
    let username: String?
    let since: Date
    let kind: String

    enum CodingKeys: String, CodingKey { case username, since, kind }
    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(username, forKey: .username)
        try c.encode(since, forKey: .since)
        try c.encode(kind, forKey: .kind)
    }
}

/// How long trades wait, and when borrowers hear about due dates.
package struct TradePolicy: Sendable {
    package var requestedDays: Double = 14
    package var acceptedDays: Double = 14
    package var reminderDaysBeforeDue: Double = 2
    package var ratingWindowDays: Double = 30
    package var maxLoanDays = 365
    /// How often the expiry and reminder sweep runs.
    package var sweepInterval: TimeInterval = 60

    package init() {}
}
