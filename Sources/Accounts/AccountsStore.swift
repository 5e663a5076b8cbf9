import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// SQL for users. Sessions live in `SessionStore`, throttle counts in `ThrottleStore`.
package struct AccountsStore: Sendable {
    package let client: Database
    package let logger: Logger

    package init(client: Database, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    enum CreateOutcome: Sendable {
        case created(UserRecord)
        case usernameTaken
        case emailTaken
    }

    static let userColumns = "u.id, u.email, u.username, u.display_name, u.bio, u.password_hash, u.email_verified_at, u.created_at, u.alerts, u.suspended_at, u.push_off"

    package typealias UserRow = (UUID, String, String, String?, String?, String?, Date?, Date, String, Date?, [String])

    package static func record(_ row: UserRow) -> UserRecord {
        UserRecord(id: row.0, email: row.1, username: row.2, displayName: row.3, bio: row.4,
                   passwordHash: row.5, emailVerifiedAt: row.6, createdAt: row.7, alerts: row.8, suspendedAt: row.9, pushOff: Set(row.10))
    }

    /// Inserts the user on `connection` (the caller's transaction); a unique violation is an
    /// outcome, not an error, so the caller can answer 409 naming the field.
    func createUser(email: String, emailNormalized: String, username: String, displayName: String?,
                    passwordHash: String, at now: Date, on connection: PostgresConnection) async throws -> CreateOutcome {
        do {
            let rows = try await connection.query("""
                INSERT INTO users AS u (email, email_normalized, username, display_name, password_hash, created_at)
                VALUES (\(email), \(emailNormalized), \(username), \(displayName), \(passwordHash), \(now))
                RETURNING \(unescaped: Self.userColumns)
                """, logger: logger)
            for try await row in rows.decode(UserRow.self) { return .created(Self.record(row)) }
            throw AppError.unavailable("user insert returned no row")
        } catch let error as PSQLError where error.sqlState == "23505" {
            let constraint = error.serverInfo?[.constraintName] ?? ""
            return constraint.contains("username") ? .usernameTaken : .emailTaken
        }
    }

    /// By email (case-insensitive) or username.
    func findByLogin(_ login: String) async throws -> UserRecord? {
        let normalized = login.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        let rows = try await client.query("""
            SELECT \(unescaped: Self.userColumns) FROM users u
            WHERE u.email_normalized = \(normalized) OR lower(u.username) = \(normalized)
            LIMIT 1
            """, logger: logger)
        for try await row in rows.decode(UserRow.self) { return Self.record(row) }
        return nil
    }

    /// `username`'s account; with a `viewer`, none when either has blocked the other, so that
    /// blocked users disappear from each other's results (profile, copies, readings) in the
    /// lookup itself.
    package func findByUsername(_ username: String, visibleTo viewer: UUID? = nil) async throws -> UserRecord? {
        let statement = SQLStatement(sql: """
            SELECT \(Self.userColumns) FROM users u
            WHERE lower(u.username) = $1 AND ($2::uuid IS NULL OR \(BlocksStore.noBlockBetween("$2", "u.id")))
            """, values: [.text(username.lowercased()), .uuid(viewer)])
        let rows = try await client.query(statement.query, logger: logger)
        for try await row in rows.decode(UserRow.self) { return Self.record(row) }
        return nil
    }

    func updateProfile(userID: UUID, displayName: FieldUpdate<String>, bio: FieldUpdate<String>, alerts: String?,
                       push: [String: Bool], on connection: PostgresConnection) async throws -> UserRecord? {
        let on = push.filter(\.value).map(\.key)
        let off = push.filter { !$0.value }.map(\.key)
        let (setName, nameValue) = displayName.parts
        let (setBio, bioValue) = bio.parts
        let rows = try await client.query("""
            UPDATE users AS u SET
                display_name = CASE WHEN \(setName) THEN \(nameValue) ELSE u.display_name END,
                bio = CASE WHEN \(setBio) THEN \(bioValue) ELSE u.bio END,
                alerts = coalesce(\(alerts), u.alerts),
                push_off = ARRAY(SELECT DISTINCT k FROM unnest(u.push_off || \(off)::text[]) AS k WHERE NOT k = ANY(\(on)::text[]) ORDER BY k),
                updated_at = now()
            WHERE u.id = \(userID)
            RETURNING \(unescaped: Self.userColumns)
            """, on: connection, logger: logger)
        for try await row in rows.decode(UserRow.self) { return Self.record(row) }
        return nil
    }

    func updatePasswordHash(userID: UUID, hash: String, on connection: PostgresConnection? = nil) async throws {
        let query: PostgresQuery = "UPDATE users SET password_hash = \(hash), updated_at = now() WHERE id = \(userID)"
        try await client.query(query, on: connection, logger: logger)
    }

    /// The user behind `username`, locked: an admin's change to the account waits for, and is
    /// waited on by, any other change to it.
    package func lockByUsername(_ username: String, on connection: PostgresConnection) async throws -> UserRecord? {
        let rows = try await connection.query("""
            SELECT \(unescaped: Self.userColumns) FROM users u
            WHERE lower(u.username) = \(username.lowercased()) AND u.erased_at IS NULL
            FOR UPDATE
            """, logger: logger)
        for try await row in rows.decode(UserRow.self) { return Self.record(row) }
        return nil
    }

    /// Suspends (with a time) or lifts (nil) a suspension.
    package func setSuspension(userID: UUID, at suspendedAt: Date?, reason: String?, on connection: PostgresConnection) async throws {
        try await connection.query("""
            UPDATE users SET suspended_at = \(suspendedAt), suspension_reason = \(reason), updated_at = now() WHERE id = \(userID)
            """, logger: logger)
    }
}
