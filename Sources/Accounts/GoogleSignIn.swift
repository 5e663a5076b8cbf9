import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// Google sign-in's use cases. An identity is found by Google's subject. A first sign-in links
/// to an existing account only when that account's address is verified and is the token's
/// (verified) address; otherwise it is 409 `link_required`, so neither someone who registered
/// another person's address unverified, nor that person, ever gets the other's account.
package struct GoogleSignIn: Sendable {
    let client: Database
    let verifier: GoogleVerifier?
    let identities: IdentitiesStore
    let sessions: SessionStore
    let throttles: ThrottleStore
    let policy: ThrottlePolicy
    let clock: any AppClock
    let logger: Logger

    package init(client: Database, verifier: GoogleVerifier?, sessions: SessionStore, throttles: ThrottleStore, policy: ThrottlePolicy,
                 clock: any AppClock, logger: Logger) {
        self.client = client
        self.verifier = verifier
        self.identities = IdentitiesStore(logger: logger)
        self.sessions = sessions
        self.throttles = throttles
        self.policy = policy
        self.clock = clock
        self.logger = logger
    }

    static let provider = "google"
    static let linkRequired = AppError.conflict(
        code: "link_required",
        detail: "An account with this email exists; sign in with its password, then link Google (POST /v1/me/identities/google)",
        field: nil)

    /// 404 while Google sign-in is off (no `GOOGLE_CLIENT_IDS`).
    func enabledVerifier() throws -> GoogleVerifier {
        guard let verifier else { throw AppError.notFound("Google sign-in is not enabled on this server") }
        return verifier
    }

    /// Bad tokens count like failed logins from the address, so guessing is throttled too.
    func verified(_ idToken: String, clientAddress: String) async throws -> GoogleIdentity {
        let verifier = try enabledVerifier()
        let key = "login:ip:\(clientAddress)"
        if let wait = try await throttles.retryAfter(key: key, limit: policy.loginFailures, window: policy.loginWindow) {
            throw AppError.throttled(retryAfterSeconds: wait)
        }
        do {
            return try await verifier.verify(idToken)
        } catch let error as AppError where error.status == .unauthorized {
            try await throttles.record(keys: [key], window: policy.loginWindow)
            throw error
        }
    }

    package struct SignedIn: Sendable {
        let user: UserRecord
        let session: SessionStore.Issued
        let created: Bool
    }

    func signIn(idToken: String, clientAddress: String) async throws -> SignedIn {
        let identity = try await verified(idToken, clientAddress: clientAddress)
        // A race with a registration of the same name or address ends in a unique violation;
        // the next attempt sees the winner's row and follows the rules for it.
        for attempt in 1...3 {
            do {
                return try await signInOnce(identity)
            } catch let error as PSQLError where error.sqlState == "23505" && attempt < 3 {
                continue
            }
        }
        throw AppError.unavailable("Google sign-in kept racing")
    }

    private func signInOnce(_ identity: GoogleIdentity) async throws -> SignedIn {
        let now = clock.now()
        return try await client.transaction(logger: logger) { connection in
            try await identities.lockSubject(Self.provider, identity.subject, on: connection)
            if let user = try await identities.user(provider: Self.provider, subject: identity.subject, on: connection) {
                guard user.suspendedAt == nil else { throw AccountsService.suspended }
                return SignedIn(user: user, session: try await sessions.create(userID: user.id, on: connection), created: false)
            }
            let normalized = identity.email.lowercased()
            if let existing = try await identities.lockUser(email: normalized, on: connection) {
                guard existing.emailVerifiedAt != nil,
                      !(try await identities.hasIdentity(userID: existing.id, provider: Self.provider, on: connection))
                else { throw Self.linkRequired }
                guard existing.suspendedAt == nil else { throw AccountsService.suspended }
                try await identities.insert(provider: Self.provider, subject: identity.subject, userID: existing.id,
                                            email: identity.email, at: now, on: connection)
                try await sessions.revokeAll(userID: existing.id, on: connection)
                logger.notice("Google identity linked by verified email", metadata: ["user_id": .string(existing.id.apiString)])
                return SignedIn(user: existing, session: try await sessions.create(userID: existing.id, on: connection), created: false)
            }
            let user = try await createUser(identity, normalized: normalized, at: now, on: connection)
            try await identities.insert(provider: Self.provider, subject: identity.subject, userID: user.id,
                                        email: identity.email, at: now, on: connection)
            return SignedIn(user: user, session: try await sessions.create(userID: user.id, on: connection), created: true)
        }
    }

    private func createUser(_ identity: GoogleIdentity, normalized: String, at now: Date,
                            on connection: PostgresConnection) async throws -> UserRecord {
        let base = Self.usernameBase(email: identity.email)
        let displayName = identity.name.map { String($0.trimmingCharacters(in: .whitespacesAndNewlines).prefix(60)) }
        for candidate in [base] + (0..<12).map({ _ in base + "_" + String(format: "%04u", UInt32.random(in: 0...9999)) }) {
            if let user = try await identities.createUser(email: identity.email, normalized: normalized, username: candidate,
                                                          displayName: displayName?.isEmpty == true ? nil : displayName,
                                                          at: now, on: connection) {
                return user
            }
        }
        throw AppError.unavailable("no free username near \(base)")
    }

    /// A username from the address's local part: lower case, `[a-z0-9_]`, 3 to 24 characters.
    static func usernameBase(email: String) -> String {
        let local = email.split(separator: "@").first.map(String.init) ?? ""
        var name = ""
        for scalar in local.lowercased().unicodeScalars {
            let allowed = ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar)
            let next: Character = allowed ? Character(scalar) : "_"
            if next == "_" && (name.isEmpty || name.hasSuffix("_")) { continue }
            name.append(next)
        }
        while name.hasSuffix("_") { name.removeLast() }
        name = String(name.prefix(24))
        return name.count >= 3 ? name : "reader" + (name.isEmpty ? "" : "_" + name)
    }
}
