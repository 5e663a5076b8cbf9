import BookwormCore
import Foundation
import PostgresNIO

/// What `bookworm users show` tells an admin about an account besides its row.
package struct AdminFacts: Sendable {
    package let suspensionReason: String?
    package let identities: [String]
    package let liveSessions: Int
    package let copies: Int
    package let posts: Int
    package let pins: Int
    package let wishes: Int
    package let openReportsAgainst: Int
    package let reportsFiled: Int
}

extension AccountsStore {
    /// Counts from other rooms' tables, read by schema (as `CopiesStore.tradeHold` reads trades).
    package func adminFacts(_ id: UUID, at now: Date, on connection: PostgresConnection) async throws -> AdminFacts {
        let rows = try await connection.query("""
            SELECT u.suspension_reason,
                   coalesce((SELECT array_agg(provider || ' ' || coalesce(email, subject) ORDER BY provider) FROM identities WHERE user_id = u.id), '{}'),
                   (SELECT count(*) FROM sessions WHERE user_id = u.id AND revoked_at IS NULL AND idle_expires_at > \(now))::int8,
                   (SELECT count(*) FROM copies WHERE owner_id = u.id)::int8,
                   (SELECT count(*) FROM posts WHERE author_id = u.id)::int8,
                   (SELECT count(*) FROM pins WHERE owner_id = u.id)::int8,
                   (SELECT count(*) FROM wishes WHERE user_id = u.id)::int8,
                   (SELECT count(*) FROM reports WHERE target_user_id = u.id AND status = 'open')::int8,
                   (SELECT count(*) FROM reports WHERE reporter_id = u.id)::int8
            FROM users u WHERE u.id = \(id)
            """, logger: logger)
        for try await r in rows.decode((String?, [String], Int, Int, Int, Int, Int, Int, Int).self) {
            return AdminFacts(suspensionReason: r.0, identities: r.1, liveSessions: r.2, copies: r.3, posts: r.4, pins: r.5,
                              wishes: r.6, openReportsAgainst: r.7, reportsFiled: r.8)
        }
        throw AppError.notFound("No user with id \(id.apiString)")
    }
}
