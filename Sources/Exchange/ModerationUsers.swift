import Accounts
import BookwormCore
import Foundation
import PostgresNIO

/// `bookworm users show|suspend|unsuspend` and `bookworm audit list`.
extension ModerationAdmin {
    /// Shows private details (the address), so reading them is recorded too.
    package func showUser(_ username: String) async throws -> String {
        let now = clock.now()
        return try await client.transaction(logger: logger) { connection in
            guard let user = try await users.lockByUsername(username, on: connection) else { throw Self.noUser(username) }
            let facts = try await users.adminFacts(user.id, at: now, on: connection)
            try await audit.record(actor: actor.name, host: actor.host, action: "users.show", target: "user \(user.username)",
                                   reason: nil, at: now, on: connection)
            return [
                "user        \(user.username) (\(user.id.apiString))",
                "email       \(user.email) (\(user.emailVerifiedAt == nil ? "not verified" : "verified"))",
                "joined      \(Self.time(user.createdAt))",
                "status      " + (user.suspendedAt.map { "suspended since \(Self.time($0)): \(facts.suspensionReason ?? "-")" } ?? "active"),
                "sign-in     " + ([user.passwordHash == nil ? nil : "password"] + facts.identities.map { Optional($0) }).compactMap { $0 }.joined(separator: ", "),
                "sessions    \(facts.liveSessions) live",
                "things      \(facts.copies) copies, \(facts.posts) posts, \(facts.pins) pins, \(facts.wishes) wishes",
                "reports     \(facts.openReportsAgainst) open against them, \(facts.reportsFiled) filed by them",
            ].joined(separator: "\n")
        }
    }

    package func suspend(_ username: String, reason: String?) async throws -> String {
        let now = clock.now()
        return try await client.transaction(logger: logger) { connection in
            guard let user = try await users.lockByUsername(username, on: connection) else { throw Self.noUser(username) }
            if let since = user.suspendedAt { return "\(user.username) is already suspended (since \(Self.time(since)))" }
            let cancelled = try await suspend(user.id, at: now, reason: reason, on: connection)
            try await audit.record(actor: actor.name, host: actor.host, action: "users.suspend", target: "user \(user.username)",
                                   reason: reason, at: now, on: connection)
            return "\(user.username) is suspended: signed out, and hidden from everyone's results" + Self.cancelledTrades(cancelled)
        }
    }

    /// What suspension does, from `users suspend` or a report: signed out, hidden (by
    /// `suspended_at`), and the trades not yet handed over cancelled, so that nobody waits on
    /// someone who cannot answer, and copies reserved for them (the other side's too, in a
    /// swap) are available again. Lent books stay lent: they still have to come back. Lifting
    /// the suspension does not bring the trades back. Returns how many were cancelled.
    func suspend(_ user: UUID, at now: Date, reason: String?, on connection: PostgresConnection) async throws -> Int {
        try await users.setSuspension(userID: user, at: now, reason: reason, on: connection)
        try await sessions.revokeAll(userID: user, on: connection)
        return try await trades.cancelOpenTrades(of: user, notice: .otherSideInactive, on: connection)
    }

    static func cancelledTrades(_ count: Int) -> String {
        count == 0 ? "" : "; \(count) open trade\(count == 1 ? "" : "s") cancelled and the other side told"
    }

    package func unsuspend(_ username: String, reason: String?) async throws -> String {
        let now = clock.now()
        return try await client.transaction(logger: logger) { connection in
            guard let user = try await users.lockByUsername(username, on: connection) else { throw Self.noUser(username) }
            guard user.suspendedAt != nil else { return "\(user.username) is not suspended" }
            try await users.setSuspension(userID: user.id, at: nil, reason: nil, on: connection)
            try await audit.record(actor: actor.name, host: actor.host, action: "users.unsuspend", target: "user \(user.username)",
                                   reason: reason, at: now, on: connection)
            return "\(user.username) is active again"
        }
    }

    package func auditList(limit: Int) async throws -> String {
        var table = [["WHEN", "WHO", "HOST", "ACTION", "TARGET", "WHY"]]
        for entry in try await audit.list(limit: limit) {
            table.append([Self.time(entry.at), entry.actor, entry.host, entry.action, entry.target, entry.reason ?? "-"])
        }
        return table.count == 1 ? "no admin actions recorded" : TextTable.render(table)
    }

    static func noUser(_ username: String) -> AppError { AppError.notFound("No user named \(username)") }
}
