import BookwormCore
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// SQL for the secrets mail carries: email codes and password-reset tokens, stored hashed.
package struct VerificationStore: Sendable {
    package let client: Database
    package let logger: Logger

    package let clock: any AppClock

    package init(client: Database, logger: Logger, clock: any AppClock) {
        self.client = client
        self.logger = logger
        self.clock = clock
    }

    static let codeLifetime: TimeInterval = 30 * 60
    static let codeAttempts = 5
    static let resetLifetime: TimeInterval = 3600

    /// Bound to the user, so a code's hash says nothing outside its own row.
    static func codeHash(userID: UUID, code: String) -> ByteBuffer {
        ByteBuffer(bytes: Digest.sha256("\(userID.apiString):\(code)"))
    }

    /// A uniformly random 6-digit code (rejection sampling, no modulo bias).
    static func newCode() -> String {
        while true {
            let bytes = SecureRandom.bytes(4)
            let value = bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            if value < 4_294_000_000 { return String(format: "%06u", value % 1_000_000) }
        }
    }

    /// Replaces any earlier code: only the newest one works.
    func issueCode(userID: UUID, on connection: PostgresConnection) async throws -> String {
        let code = Self.newCode()
        try await connection.query("""
            INSERT INTO email_verifications (user_id, code_hash, attempts, expires_at)
            VALUES (\(userID), \(Self.codeHash(userID: userID, code: code)), 0,
                    \(clock.now()) + make_interval(secs => \(Self.codeLifetime)))
            ON CONFLICT (user_id) DO UPDATE
            SET code_hash = EXCLUDED.code_hash, attempts = 0, expires_at = EXCLUDED.expires_at, created_at = \(clock.now())
            """, logger: logger)
        return code
    }

    enum CodeCheck: Equatable { case verified, wrong(remaining: Int), expired }

    /// Takes the code's row lock: inside the caller's transaction.
    func checkCode(userID: UUID, code: String, on connection: PostgresConnection) async throws -> CodeCheck {
        let rows = try await connection.query("""
            SELECT code_hash, attempts, expires_at > \(clock.now()) FROM email_verifications
            WHERE user_id = \(userID) FOR UPDATE
            """, logger: logger)
        var found: (ByteBuffer, Int, Bool)?
        for try await row in rows.decode((ByteBuffer, Int, Bool).self) { found = row }
        guard let (hash, attempts, live) = found, live, attempts < Self.codeAttempts else { return .expired }
        guard Digest.constantTimeEqual(Array(buffer: hash), Array(buffer: Self.codeHash(userID: userID, code: code))) else {
            try await connection.query("UPDATE email_verifications SET attempts = attempts + 1 WHERE user_id = \(userID)",
                                       logger: logger)
            return .wrong(remaining: Self.codeAttempts - attempts - 1)
        }
        try await connection.query("DELETE FROM email_verifications WHERE user_id = \(userID)", logger: logger)
        try await connection.query("""
            UPDATE users SET email_verified_at = coalesce(email_verified_at, \(clock.now())), updated_at = \(clock.now())
            WHERE id = \(userID)
            """, logger: logger)
        return .verified
    }

    /// A fresh single-use token; earlier unused ones stay valid until they expire.
    func issueResetToken(userID: UUID, on connection: PostgresConnection) async throws -> String {
        let token = "rst_" + SecureRandom.base64URL(SecureRandom.bytes(32))
        try await connection.query("""
            INSERT INTO password_resets (token_hash, user_id, expires_at)
            VALUES (\(ByteBuffer(bytes: Digest.sha256(token))), \(userID), \(clock.now()) + make_interval(secs => \(Self.resetLifetime)))
            """, logger: logger)
        return token
    }

    /// Marks the token used and returns its user, when it is known, unused and unexpired.
    func consumeResetToken(_ token: String, on connection: PostgresConnection) async throws -> UUID? {
        let rows = try await connection.query("""
            UPDATE password_resets SET used_at = \(clock.now())
            WHERE token_hash = \(ByteBuffer(bytes: Digest.sha256(token))) AND used_at IS NULL AND expires_at > \(clock.now())
            RETURNING user_id
            """, logger: logger)
        for try await userID in rows.decode(UUID.self) { return userID }
        return nil
    }

    /// After a reset every other outstanding link is void too.
    func voidResetTokens(userID: UUID, on connection: PostgresConnection) async throws {
        try await connection.query("""
            UPDATE password_resets SET used_at = \(clock.now()) WHERE user_id = \(userID) AND used_at IS NULL
            """, logger: logger)
    }

    static let linkLifetime: TimeInterval = 24 * 3600

    /// The link in a verification mail; earlier links stay valid until they expire.
    func issueLink(userID: UUID, on connection: PostgresConnection) async throws -> String {
        let token = "vfy_" + SecureRandom.base64URL(SecureRandom.bytes(32))
        try await connection.query("""
            INSERT INTO email_links (token_hash, user_id, expires_at)
            VALUES (\(ByteBuffer(bytes: Digest.sha256(token))), \(userID), \(clock.now()) + make_interval(secs => \(Self.linkLifetime)))
            """, logger: logger)
        return token
    }

    /// Whether a link (`vfy_…`) or reset (`rst_…`) token can still be used, without using it.
    func isLive(_ token: String) async throws -> Bool {
        let hash = ByteBuffer(bytes: Digest.sha256(token))
        let query: PostgresQuery = token.hasPrefix("vfy_")
            ? "SELECT 1 FROM email_links WHERE token_hash = \(hash) AND used_at IS NULL AND expires_at > \(clock.now())"
            : "SELECT 1 FROM password_resets WHERE token_hash = \(hash) AND used_at IS NULL AND expires_at > \(clock.now())"
        for try await _ in try await client.query(query, logger: logger) { return true }
        return false
    }

    /// Uses a verification link: its user's address is verified and the code retired. Nil when
    /// the link is unknown, used or expired.
    func consumeLink(_ token: String, on connection: PostgresConnection) async throws -> UUID? {
        let rows = try await connection.query("""
            UPDATE email_links SET used_at = \(clock.now())
            WHERE token_hash = \(ByteBuffer(bytes: Digest.sha256(token))) AND used_at IS NULL AND expires_at > \(clock.now())
            RETURNING user_id
            """, logger: logger)
        var found: UUID?
        for try await userID in rows.decode(UUID.self) { found = userID }
        guard let userID = found else { return nil }
        try await markEmailVerified(userID: userID, on: connection)
        try await connection.query("DELETE FROM email_verifications WHERE user_id = \(userID)", logger: logger)
        return userID
    }

    func markEmailVerified(userID: UUID, on connection: PostgresConnection) async throws {
        try await connection.query("""
            UPDATE users SET email_verified_at = coalesce(email_verified_at, \(clock.now())) WHERE id = \(userID)
            """, logger: logger)
    }
}
