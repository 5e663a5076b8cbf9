import BookwormCore
import Foundation
import Logging
import Mail
import PostgresNIO

/// The account flows that send mail: the email code (at registration and on request) and the
/// password reset. Each writes its outbox row in the transaction of its own change.
package struct AccountMail: Sendable {
    package let client: Database
    package let users: AccountsStore
    package let sessions: SessionStore
    let verifications: VerificationStore
    package let outbox: OutboxStore
    package let templates: MailTemplates
    package let throttles: ThrottleStore
    let hasher: PasswordHasher
    package let logger: Logger

    package init(client: Database, users: AccountsStore, sessions: SessionStore, verifications: VerificationStore, outbox: OutboxStore, templates: MailTemplates, throttles: ThrottleStore, hasher: PasswordHasher, logger: Logger) {
        self.client = client
        self.users = users
        self.sessions = sessions
        self.verifications = verifications
        self.outbox = outbox
        self.templates = templates
        self.throttles = throttles
        self.hasher = hasher
        self.logger = logger
    }

    static let resendLimit = 5
    static let resetLimitPerAccount = 3
    static let resetLimitPerAddress = 20
    static let window: TimeInterval = 3600

    /// Called inside the registration transaction.
    func sendCode(to user: UserRecord, on connection: PostgresConnection) async throws {
        let code = try await verifications.issueCode(userID: user.id, on: connection)
        let link = try await verifications.issueLink(userID: user.id, on: connection)
        try await outbox.enqueue(templates.verification(to: user.email, username: user.username, code: code, token: link),
                                 kind: .verifyEmail, on: connection)
    }

    func resendCode(to user: UserRecord) async throws {
        guard user.emailVerifiedAt == nil else {
            throw AppError.conflict(code: "already-verified", detail: "This email address is already verified", field: nil)
        }
        let key = "verify-resend:\(user.id.apiString)"
        if let wait = try await throttles.retryAfter(key: key, limit: Self.resendLimit, window: Self.window) {
            throw AppError.throttled(retryAfterSeconds: wait)
        }
        try await client.transaction(logger: logger) { connection in
            try await sendCode(to: user, on: connection)
            try await throttles.record(keys: [key], window: Self.window, on: connection)
        }
    }

    package func verify(_ user: UserRecord, code: String) async throws {
        guard user.emailVerifiedAt == nil else { return }
        // One transaction under the code's row lock, so parallel guesses cannot exceed the limit.
        let check = try await client.transaction(logger: logger) { connection in
            try await self.verifications.checkCode(userID: user.id, code: code, on: connection)
        }
        switch check {
        case .verified:
            sessions.forget(userID: user.id)
            return
        case .wrong(let remaining) where remaining > 0:
            throw AppError.broken("code", "is not the code we sent (\(remaining) tries left)")
        case .wrong, .expired:
            throw AppError.broken("code", "has expired or was tried too often; ask for a new one")
        }
    }

    /// The same answer whether or not the address has an account; per-address throttling is
    /// the only refusal, and it does not depend on the account either. Over the per-account
    /// limit the request is quietly dropped.
    func requestReset(email normalized: String, clientAddress: String) async throws {
        let addressKey = "reset:ip:\(clientAddress)"
        if let wait = try await throttles.retryAfter(key: addressKey, limit: Self.resetLimitPerAddress, window: Self.window) {
            throw AppError.throttled(retryAfterSeconds: wait)
        }
        try await throttles.record(keys: [addressKey], window: Self.window)
        guard let user = try await users.findByLogin(normalized) else { return }
        let accountKey = "reset:account:\(user.id.apiString)"
        guard try await throttles.retryAfter(key: accountKey, limit: Self.resetLimitPerAccount, window: Self.window) == nil else {
            logger.notice("password reset dropped: per-account limit", metadata: ["user_id": .string(user.id.apiString)])
            return
        }
        try await client.transaction(logger: logger) { connection in
            if try await outbox.isSuppressed(user.email, on: connection) { return }
            let token = try await verifications.issueResetToken(userID: user.id, on: connection)
            try await outbox.enqueue(templates.passwordReset(to: user.email, username: user.username, token: token),
                                     kind: .passwordReset, on: connection)
            try await throttles.record(keys: [accountKey], window: Self.window, on: connection)
        }
    }

    /// Sets the password, voids every other reset link and signs out every session. Following
    /// the link proves the address, so it counts as verified.
    func confirmReset(token: String, newPassword: String) async throws {
        guard token.count <= 100 else { throw Self.badToken }
        let hash = try await hasher.hash(newPassword)
        try await client.transaction(logger: logger) { connection in
            guard let userID = try await verifications.consumeResetToken(token, on: connection) else { throw Self.badToken }
            try await users.updatePasswordHash(userID: userID, hash: hash, on: connection)
            try await verifications.voidResetTokens(userID: userID, on: connection)
            try await verifications.markEmailVerified(userID: userID, on: connection)
            try await sessions.revokeAll(userID: userID, on: connection)
        }
    }

    static let badToken = AppError.broken("token", "is unknown, used or expired; ask for a new link")

    /// The link in the verification mail, followed (and confirmed) in a browser.
    func verifyByLink(_ token: String) async throws {
        let userID = try await client.transaction(logger: logger) { connection in
            guard let userID = try await verifications.consumeLink(token, on: connection) else { throw Self.badToken }
            return userID
        }
        sessions.forget(userID: userID)
    }

    func isLive(_ token: String) async throws -> Bool {
        try await verifications.isLive(token)
    }
}
