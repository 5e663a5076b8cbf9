import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// SQL for sign-in identities (provider, subject) → user. Keyed by the provider's subject,
/// never by email: an address can change hands, a subject cannot.
package struct IdentitiesStore: Sendable {
    package let logger: Logger

    package init(logger: Logger) {
        self.logger = logger
    }

    /// Serialises everything done for one subject (two first sign-ins at once make one account).
    func lockSubject(_ provider: String, _ subject: String, on connection: PostgresConnection) async throws {
        try await connection.query("SELECT pg_advisory_xact_lock(hashtext('identity:' || \(provider) || ':' || \(subject)))",
                                   logger: logger)
    }

    func user(provider: String, subject: String, on connection: PostgresConnection) async throws -> UserRecord? {
        let rows = try await connection.query("""
            SELECT \(unescaped: AccountsStore.userColumns) FROM identities i JOIN users u ON u.id = i.user_id
            WHERE i.provider = \(provider) AND i.subject = \(subject)
            """, logger: logger)
        for try await row in rows.decode(AccountsStore.UserRow.self) { return AccountsStore.record(row) }
        return nil
    }

    /// The account holding this (normalised) address, locked.
    func lockUser(email normalized: String, on connection: PostgresConnection) async throws -> UserRecord? {
        let rows = try await connection.query("""
            SELECT \(unescaped: AccountsStore.userColumns) FROM users u WHERE u.email_normalized = \(normalized) FOR UPDATE
            """, logger: logger)
        for try await row in rows.decode(AccountsStore.UserRow.self) { return AccountsStore.record(row) }
        return nil
    }

    func hasIdentity(userID: UUID, provider: String, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query("""
            SELECT 1 FROM identities WHERE user_id = \(userID) AND provider = \(provider)
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    func insert(provider: String, subject: String, userID: UUID, email: String, at now: Date, on connection: PostgresConnection) async throws {
        try await connection.query("""
            INSERT INTO identities (provider, subject, user_id, email, created_at)
            VALUES (\(provider), \(subject), \(userID), \(email), \(now))
            """, logger: logger)
    }

    func delete(userID: UUID, provider: String, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query("""
            DELETE FROM identities WHERE user_id = \(userID) AND provider = \(provider) RETURNING 1
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// An account made by Google: verified address, no password. Nil when the username is
    /// taken or held (the caller tries another).
    func createUser(email: String, normalized: String, username: String, displayName: String?, at now: Date,
                    on connection: PostgresConnection) async throws -> UserRecord? {
        let rows = try await connection.query("""
            INSERT INTO users AS u (email, email_normalized, username, display_name, password_hash, email_verified_at, created_at)
            SELECT \(email), \(normalized), \(username), \(displayName), NULL, \(now), \(now)
            WHERE NOT EXISTS (SELECT 1 FROM users WHERE lower(username) = \(username))
              AND NOT EXISTS (SELECT 1 FROM username_holds WHERE username = \(username))
            RETURNING \(unescaped: AccountsStore.userColumns)
            """, logger: logger)
        for try await row in rows.decode(AccountsStore.UserRow.self) { return AccountsStore.record(row) }
        return nil
    }
}
