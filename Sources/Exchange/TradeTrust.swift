import Accounts
import BookwormCore
import Foundation
import PostgresNIO

/// A rating as its author sees it after posting.
package struct RatingView: Encodable, Sendable {
    let tradeID: UUID
    let score: Int
    let comment: String?
    let createdAt: Date

    enum CodingKeys: String, CodingKey { case score, comment, tradeID = "trade_id", createdAt = "created_at" }
    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(tradeID.apiString, forKey: .tradeID)
        try c.encode(score, forKey: .score)
        try c.encode(comment, forKey: .comment)
        try c.encode(createdAt, forKey: .createdAt)
    }
}

/// What a public profile shows of someone's trades.
package struct TradeRecordSummary: Sendable {
    package let completedTrades: Int
    package let ratingAverage: Double?
    package let ratingCount: Int
}

/// Trust: ratings after a completed trade, profile figures, journeys, and what a block does to
/// open trades.
extension TradesService {
    /// Once per participant, within the rating window after completion.
    package func rate(_ id: UUID, by user: UUID, score: Int, comment: String?) async throws -> RatingView {
        try await client.transaction(logger: logger) { connection in
            let now = clock.now()
            guard let trade = try await trades.lock(id, on: connection), let role = trade.role(of: user) else { throw Self.notFound(id) }
            guard trade.state == .completed || trade.state == .returned, let completedAt = trade.completedAt else {
                throw AppError.invalidTransition(state: trade.state.rawValue, action: "rate")
            }
            guard now.timeIntervalSince(completedAt) <= policy.ratingWindowDays * 86400 else {
                throw AppError.conflict(code: "rating_closed", detail: "Ratings close \(Int(policy.ratingWindowDays)) days after completion", field: nil)
            }
            let rows = try await connection.query("""
                INSERT INTO trade_ratings (trade_id, rater_id, ratee_id, score, comment, created_at)
                VALUES (\(id), \(user), \(trade.user(role.other)), \(score), \(comment), \(now))
                ON CONFLICT DO NOTHING RETURNING created_at
                """, logger: logger)
            for try await createdAt in rows.decode(Date.self) {
                return RatingView(tradeID: id, score: score, comment: comment, createdAt: createdAt)
            }
            throw AppError.conflict(code: "already_rated", detail: "You have rated this trade already", field: nil)
        }
    }

    package func summary(of user: UUID) async throws -> TradeRecordSummary {
        let rows = try await client.query("""
            SELECT (SELECT count(*) FROM trades WHERE owner_id = \(user) AND state IN ('completed', 'returned'))
                 + (SELECT count(*) FROM trades WHERE requester_id = \(user) AND state IN ('completed', 'returned')),
                   (SELECT avg(score)::float8 FROM trade_ratings WHERE ratee_id = \(user)),
                   (SELECT count(*) FROM trade_ratings WHERE ratee_id = \(user))
            """, logger: logger)
        for try await (completed, average, count) in rows.decode((Int, Double?, Int).self) {
            return TradeRecordSummary(completedTrades: completed, ratingAverage: average.map { ($0 * 100).rounded() / 100 },
                                      ratingCount: count)
        }
        return TradeRecordSummary(completedTrades: 0, ratingAverage: nil, ratingCount: 0)
    }

    package func journey(of copy: UUID, viewer: UUID?) async throws -> [JourneyStep] {
        guard let steps = try await copies.journey(copy, viewer: viewer) else { throw AppError.notFound("No copy with id \(copy.apiString)") }
        return steps
    }

    /// Blocking someone cancels the open trades between the two, in the block's transaction
    /// (copies locked first, as every trade write does). No mail: a block is not announced.
    package func block(_ blocked: UUID, by blocker: UUID) async throws {
        try await client.transaction(logger: logger) { connection in
            try await blocks.block(blocked, by: blocker, on: connection)
            let open = try await trades.openTrades(between: blocker, and: blocked, lock: false, on: connection)
            _ = try await trades.lockCopies(open.flatMap(\.copyIDs), on: connection)
            let now = clock.now()
            for trade in try await trades.openTrades(between: blocker, and: blocked, lock: true, on: connection) {
                if trade.state == .accepted { try await copies.release(trade: trade.id, on: connection) }
                try await trades.setState(trade.id, .cancelled, at: now, expiresAt: nil, on: connection)
                try await trades.addEvent(trade.id, action: "cancel", state: .cancelled, by: blocker, at: now, on: connection)
            }
        }
    }

    /// Account deletion and suspension: every open trade of `user` (requested or accepted; a
    /// lent book still has to come back) is cancelled in the caller's transaction (copies
    /// locked first, as every trade write does), reserved copies on either side are available
    /// again, and the other side is told with `notice`.
    package func cancelOpenTrades(of user: UUID, notice: TradeNotice = .cancelled, on connection: PostgresConnection) async throws -> Int {
        let open = try await trades.openTrades(of: user, lock: false, on: connection)
        _ = try await trades.lockCopies(open.flatMap(\.copyIDs), on: connection)
        let now = clock.now()
        let locked = try await trades.openTrades(of: user, lock: true, on: connection)
        for trade in locked {
            if trade.state == .accepted { try await copies.release(trade: trade.id, on: connection) }
            try await trades.setState(trade.id, .cancelled, at: now, expiresAt: nil, on: connection)
            try await trades.addEvent(trade.id, action: "cancel", state: .cancelled, by: user, at: now, on: connection)
            if let role = trade.role(of: user) {
                try await mail.notify(notice, trade: trade.id, recipients: [role.other], on: connection)
            }
        }
        return locked.count
    }
}
