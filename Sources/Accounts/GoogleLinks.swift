import BookwormCore
import Foundation
import PostgresNIO

/// Linking and unlinking Google on an account that is signed in.
extension GoogleSignIn {
    /// Links the token's Google account to `session`'s user; the user's other sessions are
    /// revoked (a new way in was added). Linking what is already linked to this user is a no-op.
    func link(idToken: String, session: AuthenticatedSession, clientAddress: String) async throws {
        let identity = try await verified(idToken, clientAddress: clientAddress)
        let now = clock.now()
        try await client.transaction(logger: logger) { connection in
            try await identities.lockSubject(Self.provider, identity.subject, on: connection)
            if let owner = try await identities.user(provider: Self.provider, subject: identity.subject, on: connection) {
                guard owner.id == session.user.id else {
                    throw AppError.conflict(code: "identity_in_use", detail: "This Google account signs in to another account", field: "id_token")
                }
                return
            }
            guard !(try await identities.hasIdentity(userID: session.user.id, provider: Self.provider, on: connection)) else {
                throw AppError.conflict(code: "already_linked", detail: "Another Google account is linked; unlink it first", field: "id_token")
            }
            try await identities.insert(provider: Self.provider, subject: identity.subject, userID: session.user.id,
                                        email: identity.email, at: now, on: connection)
            try await sessions.revokeAll(userID: session.user.id, keeping: session.sessionID, on: connection)
        }
    }

    /// Google again, for something that cannot be undone (erasing an account without a
    /// password): the token must be of the Google account linked to `user` (422 otherwise).
    package func confirmOwner(idToken: String, of user: UserRecord, clientAddress: String) async throws {
        let identity: GoogleIdentity
        do {
            identity = try await verified(idToken, clientAddress: clientAddress)
        } catch let error as AppError where error.status == .unauthorized || error.status == .notFound {
            throw AppError.broken("id_token", "is not a valid Google token for this server")
        }
        let owner = try await client.withConnection { connection in
            try await identities.user(provider: Self.provider, subject: identity.subject, on: connection)
        }
        guard owner?.id == user.id else { throw AppError.broken("id_token", "is not of the Google account linked to this account") }
    }

    /// Refused (409) when Google is the account's only way in: it has no password.
    func unlink(session: AuthenticatedSession) async throws {
        _ = try enabledVerifier()
        try await client.transaction(logger: logger) { connection in
            guard session.user.passwordHash != nil else {
                throw AppError.conflict(code: "only_sign_in", detail: "Google is this account's only way to sign in; set a password first",
                                        field: nil)
            }
            guard try await identities.delete(userID: session.user.id, provider: Self.provider, on: connection) else {
                throw AppError.notFound("No Google account is linked")
            }
        }
    }
}
