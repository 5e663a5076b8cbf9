import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// Opaque bearer tokens: 256 random bits shown to the client once; only their SHA-256 is
/// stored, so a database leak yields no usable token.
package struct SessionStore: Sendable {
    package let client: Database
    package let policy: SessionPolicy
    package let logger: Logger

    package let clock: any AppClock
    /// Sessions just looked up (the API's processes); nil: every lookup reads the database.
    package let cache: SessionCache?

    package init(client: Database, policy: SessionPolicy, logger: Logger, clock: any AppClock, cache: SessionCache? = nil) {
        self.client = client
        self.policy = policy
        self.logger = logger
        self.clock = clock
        self.cache = cache
    }

    /// Idle expiry is pushed forward at most once a minute, so reads stay reads.
    static let touchInterval: Double = 60

    package struct Issued: Sendable {
        let token: String
        let expiresAt: Date
    }

    static func newToken() -> String { "bw_" + SecureRandom.base64URL(SecureRandom.bytes(32)) }

    static func tokenHash(_ token: String) -> ByteBuffer { ByteBuffer(bytes: Digest.sha256(token)) }

    package func create(userID: UUID, on connection: PostgresConnection) async throws -> Issued {
        let token = Self.newToken()
        let now = clock.now()
        let rows = try await connection.query("""
            INSERT INTO sessions (user_id, token_hash, created_at, last_used_at, idle_expires_at, absolute_expires_at)
            VALUES (\(userID), \(Self.tokenHash(token)), \(now), \(now),
                    \(now) + make_interval(secs => \(policy.idleTimeout)),
                    \(now) + make_interval(secs => \(policy.absoluteTimeout)))
            RETURNING LEAST(idle_expires_at, absolute_expires_at)
            """, logger: logger)
        for try await expiresAt in rows.decode(Date.self) { return Issued(token: token, expiresAt: expiresAt) }
        throw AppError.unavailable("session insert returned no row")
    }

    package func create(userID: UUID) async throws -> Issued {
        try await client.withConnection { try await create(userID: userID, on: $0) }
    }

    /// The live session for `token` with its user, or nil when unknown, revoked or expired.
    func authenticate(token: String) async throws -> AuthenticatedSession? {
        guard token.hasPrefix("bw_"), token.utf8.count <= 100 else { return nil }
        let hash = Self.tokenHash(token), now = clock.now()
        if let kept = cache?.session(hash, now: now) { return kept }
        let generation = cache?.generation()
        let lookup = SessionLookupSQL(tokenHash: hash, now: now, idleTimeout: policy.idleTimeout, touchInterval: Self.touchInterval)
        for row in try await client.execute(lookup, logger: logger) {
            let user = AccountsStore.record((row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8, row.9, row.10, row.11))
            let session = AuthenticatedSession(sessionID: row.0, user: user)
            if let cache, let generation { cache.keep(hash, session, readAt: generation, now: now, expiresAt: row.12) }
            return session
        }
        return nil
    }

    /// Which of `sessionIDs` are still live (not revoked or expired, their user not suspended);
    /// those are used now, as a request would use them: a stream open for hours keeps its session.
    /// The same conditions and touch as a request's lookup (`SessionLookupSQL.live`).
    package func stillLive(_ sessionIDs: [UUID]) async throws -> Set<UUID> {
        guard !sessionIDs.isEmpty else { return [] }
        var bindings = PostgresBindings(capacity: 4)
        bindings.append(sessionIDs)
        bindings.append(policy.idleTimeout)
        bindings.append(Self.touchInterval)
        bindings.append(clock.now())
        let rows = try await client.query(PostgresQuery(unsafeSQL: Self.stillLiveSQL, binds: bindings), logger: logger)
        var live: Set<UUID> = []
        for try await id in rows.decode(UUID.self) { live.insert(id) }
        return live
    }

    static let stillLiveSQL = SessionLookupSQL.live(matching: "s.id = ANY($1)", select: "live.id")

    /// Whether one session of `userID` is still live: the cache's word while it holds the
    /// session (a lookup kept it less than `SessionCache.lifetime` ago and no revocation has
    /// been heard since), else the database's (`stillLive`).
    package func isLive(_ sessionID: UUID, of userID: UUID) async throws -> Bool {
        if cache?.holds(sessionID: sessionID, of: userID, now: clock.now()) == true { return true }
        return try await stillLive([sessionID]).contains(sessionID)
    }

    /// After this process changed the user's row: its kept sessions carry the old one. The
    /// trigger's notification would drop them too, but maybe after the response, and the
    /// client's next request must read what it wrote.
    package func forget(userID: UUID) {
        cache?.drop(userID: userID)
    }

    func revoke(sessionID: UUID) async throws {
        let rows = try await client.query("""
            UPDATE sessions SET revoked_at = \(clock.now()) WHERE id = \(sessionID) AND revoked_at IS NULL RETURNING user_id
            """, logger: logger)
        // The trigger's notification reaches this process too, but maybe after the response.
        for try await userID in rows.decode(UUID.self) { cache?.drop(userID: userID) }
    }

    /// Revokes every session of the user, but `keeping` if given.
    package func revokeAll(userID: UUID, keeping: UUID? = nil, on connection: PostgresConnection? = nil) async throws {
        let query: PostgresQuery = """
            UPDATE sessions SET revoked_at = \(clock.now())
            WHERE user_id = \(userID) AND revoked_at IS NULL AND id IS DISTINCT FROM \(keeping)
            """
        try await client.query(query, on: connection, logger: logger)
        cache?.drop(userID: userID)
    }

    /// Housekeeping: drop sessions that can no longer be used.
    package func deleteExpired() async throws {
        let now = clock.now()
        try await client.query("""
            DELETE FROM sessions
            WHERE absolute_expires_at < \(now) OR idle_expires_at < \(now) OR revoked_at < \(now) - interval '1 day'
            """, logger: logger)
    }
}

/// The session and user behind a token, pushing idle expiry forward at most once a
/// `touchInterval`. Every signed-in request runs it, so it is prepared (see `PreparedSQL`).
struct SessionLookupSQL: PostgresPreparedStatement {
    static let name = "bookworm_session_lookup"
    static let sql = live(matching: "s.token_hash = $1", select: "live.id, \(AccountsStore.userColumns), live.expires_at")

    /// The sessions `matching` that are live at $4, their idle expiry pushed forward ($2 seconds)
    /// when last used more than $3 seconds ago, with their user, who must not be suspended.
    static func live(matching: String, select: String) -> String {
        """
        WITH live AS (
            SELECT s.id, s.user_id, s.last_used_at, LEAST(s.idle_expires_at, s.absolute_expires_at) AS expires_at FROM sessions s
            WHERE \(matching) AND s.revoked_at IS NULL
              AND s.idle_expires_at > $4 AND s.absolute_expires_at > $4
        ), touched AS (
            UPDATE sessions t SET last_used_at = $4,
                idle_expires_at = LEAST($4 + make_interval(secs => $2), t.absolute_expires_at)
            FROM live WHERE t.id = live.id AND live.last_used_at < $4 - make_interval(secs => $3)
        )
        SELECT \(select)
        FROM live JOIN users u ON u.id = live.user_id AND u.suspended_at IS NULL
        """
    }
    typealias Row = (UUID, UUID, String, String, String?, String?, String?, Date?, Date, String, Date?, [String], Date)

    let tokenHash: ByteBuffer
    let now: Date
    let idleTimeout: Double
    let touchInterval: Double

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 4)
        bindings.append(tokenHash)
        bindings.append(idleTimeout)
        bindings.append(touchInterval)
        bindings.append(now)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
}
