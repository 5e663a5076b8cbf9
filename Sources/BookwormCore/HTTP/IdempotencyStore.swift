import Foundation
import Logging
import PostgresNIO

/// Whose keys a key is among: the signed-in user's, or the client address's where nobody is.
package struct IdempotencyScope: Sendable, Equatable {
    let user: UUID?
    let address: String

    var name: String { user.map { "user:\($0.apiString)" } ?? "address:\(address)" }
}

/// A write's first answer, as `idempotency_keys` keeps it.
package struct KeptAnswer: Sendable {
    let method: String
    let target: String
    let requestHash: [UInt8]
    let status: Int
    let contentType: String?
    let location: String?
    let etag: String?
    /// Nil when the answer is not replayable (it carried a secret, or was too large to keep).
    let body: ByteBuffer?
}

/// SQL for `idempotency_keys` (migration 0032). A key counts for `lifetime` after its first
/// answer, by the injected clock; `Housekeeping` deletes older ones.
package struct IdempotencyStore: Sendable {
    let client: Database
    let clock: any AppClock
    let lifetime: TimeInterval
    let logger: Logger

    package init(client: Database, clock: any AppClock, hours: Int, logger: Logger) {
        self.client = client
        self.clock = clock
        self.lifetime = TimeInterval(hours) * 3600
        self.logger = logger
    }

    /// Thrown where the key turns out to be kept already (a request with it committed meanwhile).
    struct Taken: Error {}

    private var cutoff: Date { clock.now().addingTimeInterval(-lifetime) }

    func find(_ scope: IdempotencyScope, key: String) async throws -> KeptAnswer? {
        let rows = try await client.query("""
            SELECT method, target, request_hash, status, content_type, location, etag, body
            FROM idempotency_keys WHERE scope = \(scope.name) AND key = \(key) AND created_at > \(cutoff)
            """, logger: logger)
        guard let row = rows.rows.first else { return nil }
        let (method, target, hash, status, contentType, location, etag, body) =
            try row.decode((String, String, ByteBuffer, Int, String?, String?, String?, ByteBuffer?).self)
        return KeptAnswer(method: method, target: target, requestHash: Array(hash.readableBytesView), status: status,
                          contentType: contentType, location: location, etag: etag, body: body)
    }

    /// Right after the write's `BEGIN`: the key's lock for the transaction (held by another
    /// request: 409 with Retry-After), then whether it is kept already (`Taken`).
    func claim(_ scope: IdempotencyScope, key: String, on connection: PostgresConnection, logger: Logger) async throws {
        let locked = try await Rows(connection.query(
            "SELECT pg_try_advisory_xact_lock(hashtextextended(\(scope.name + "\n" + key), 5232))", logger: logger))
        guard try locked.rows.first?.decode(Bool.self) == true else {
            throw AppError.busy(code: "idempotency_in_progress",
                                detail: "A request with this Idempotency-Key is still running; try again shortly", retryAfterSeconds: 1)
        }
        // A statement of its own: its snapshot is taken after the lock, so it sees a request
        // that committed the key just before.
        let kept = try await Rows(connection.query("""
            SELECT 1 FROM idempotency_keys WHERE scope = \(scope.name) AND key = \(key) AND created_at > \(cutoff)
            """, logger: logger))
        if !kept.rows.isEmpty { throw Taken() }
    }

    /// Before the write's `COMMIT`: the answer, in the write's transaction. A key kept past its
    /// lifetime is taken over. A user the write erased keeps nothing (no row may name them).
    func keep(_ answer: KeptAnswer, scope: IdempotencyScope, key: String, on connection: PostgresConnection, logger: Logger) async throws {
        let rows = try await Rows(connection.query("""
            WITH caller AS (SELECT \(scope.user)::uuid IS NULL OR EXISTS (SELECT 1 FROM users WHERE id = \(scope.user)) AS present),
            kept AS (
                INSERT INTO idempotency_keys (scope, key, user_id, method, target, request_hash, status, content_type, location, etag,
                                              body, created_at)
                SELECT \(scope.name), \(key), \(scope.user), \(answer.method), \(answer.target), \(ByteBuffer(bytes: answer.requestHash)),
                       \(answer.status), \(answer.contentType), \(answer.location), \(answer.etag), \(answer.body), \(clock.now())
                FROM caller WHERE present
                ON CONFLICT (scope, key) DO UPDATE SET user_id = EXCLUDED.user_id, method = EXCLUDED.method, target = EXCLUDED.target,
                    request_hash = EXCLUDED.request_hash, status = EXCLUDED.status, content_type = EXCLUDED.content_type,
                    location = EXCLUDED.location, etag = EXCLUDED.etag, body = EXCLUDED.body, created_at = EXCLUDED.created_at
                WHERE idempotency_keys.created_at <= \(cutoff)
                RETURNING 1)
            SELECT (SELECT present FROM caller), EXISTS (SELECT 1 FROM kept)
            """, logger: logger))
        guard let (present, kept) = try rows.rows.first?.decode((Bool, Bool).self) else { throw AppError.unavailable("no answer from keep") }
        if present && !kept { throw Taken() }
    }

    /// Deletes keys past their lifetime, a batch at a time; how many went.
    package func purge(batch: Int = 5000) async throws -> Int {
        let rows = try await client.query("""
            WITH old AS (SELECT scope, key FROM idempotency_keys WHERE created_at <= \(cutoff) LIMIT \(batch))
            DELETE FROM idempotency_keys k USING old WHERE k.scope = old.scope AND k.key = old.key RETURNING 1
            """, logger: logger)
        return rows.rows.count
    }
}
