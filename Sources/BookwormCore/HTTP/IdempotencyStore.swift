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

    // The three statements of every keyed write are prepared once per connection: planned anew
    // each time, they cost a keyed copy a third of its throughput (BookwormBench idempotency).

    func find(_ scope: IdempotencyScope, key: String) async throws -> KeptAnswer? {
        try await client.execute(FindKeptSQL(scope: scope.name, key: key, cutoff: cutoff), logger: logger).first ?? nil
    }

    /// Right after the write's `BEGIN`: the key's lock for the transaction (held by another
    /// request: 409 with Retry-After). A request that committed the key in the meantime is found
    /// by `keep`, whose insert then conflicts (`Taken`): only its work is lost, never its answer.
    func claim(_ scope: IdempotencyScope, key: String, on connection: PostgresConnection, logger: Logger) async throws {
        guard try await lock(scope, key: key, on: connection, logger: logger) else {
            throw AppError.busy(code: "idempotency_in_progress",
                                detail: "A request with this Idempotency-Key is still running; try again shortly", retryAfterSeconds: 1)
        }
    }

    /// The key's lock for the transaction, if no other request holds it.
    func lock(_ scope: IdempotencyScope, key: String, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        var locked = false
        try await FailedPreparation.watching(connection, logger: logger) {
            for try await row in try await connection.execute(ClaimKeySQL(lockName: scope.name + "\n" + key), logger: logger) { locked = row }
        }
        return locked
    }

    /// Before the write's `COMMIT`: the answer, in the write's transaction. A key kept past its
    /// lifetime is taken over. A user the write erased keeps nothing (no row may name them).
    func keep(_ answer: KeptAnswer, scope: IdempotencyScope, key: String, on connection: PostgresConnection, logger: Logger) async throws {
        let statement = KeepAnswerSQL(answer: answer, scope: scope, key: key, now: clock.now(), cutoff: cutoff)
        var outcome: (present: Bool, kept: Bool)?
        try await FailedPreparation.watching(connection, logger: logger) {
            for try await row in try await connection.execute(statement, logger: logger) { outcome = row }
        }
        guard let outcome else { throw AppError.unavailable("no answer from keep") }
        if outcome.present && !outcome.kept { throw Taken() }
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

struct FindKeptSQL: PostgresPreparedStatement {
    static let name = "bookworm_idempotency_find"
    static let sql = """
        SELECT method, target, request_hash, status, content_type, location, etag, body
        FROM idempotency_keys WHERE scope = $1 AND key = $2 AND created_at > $3
        """
    static var bindingDataTypes: [PostgresDataType] { [.text, .text, .timestamptz] }
    let scope: String, key: String, cutoff: Date

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 3)
        bindings.append(scope)
        bindings.append(key)
        bindings.append(cutoff)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> KeptAnswer? {
        let (method, target, hash, status, contentType, location, etag, body) =
            try row.decode((String, String, ByteBuffer, Int, String?, String?, String?, ByteBuffer?).self)
        return KeptAnswer(method: method, target: target, requestHash: Array(hash.readableBytesView), status: status,
                          contentType: contentType, location: location, etag: etag, body: body)
    }
}

struct ClaimKeySQL: PostgresPreparedStatement {
    static let name = "bookworm_idempotency_claim"
    static let sql = "SELECT pg_try_advisory_xact_lock(hashtextextended($1, 5232))"
    static var bindingDataTypes: [PostgresDataType] { [.text] }
    let lockName: String

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(lockName)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Bool { try row.decode(Bool.self) }
}

struct KeepAnswerSQL: PostgresPreparedStatement {
    static let name = "bookworm_idempotency_keep"
    static let sql = """
        WITH caller AS (SELECT $3::uuid IS NULL OR EXISTS (SELECT 1 FROM users WHERE id = $3) AS present),
        kept AS (
            INSERT INTO idempotency_keys (scope, key, user_id, method, target, request_hash, status, content_type, location, etag,
                                          body, created_at)
            SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 FROM caller WHERE present
            ON CONFLICT (scope, key) DO UPDATE SET user_id = EXCLUDED.user_id, method = EXCLUDED.method, target = EXCLUDED.target,
                request_hash = EXCLUDED.request_hash, status = EXCLUDED.status, content_type = EXCLUDED.content_type,
                location = EXCLUDED.location, etag = EXCLUDED.etag, body = EXCLUDED.body, created_at = EXCLUDED.created_at
            WHERE idempotency_keys.created_at <= $13
            RETURNING 1)
        SELECT (SELECT present FROM caller), EXISTS (SELECT 1 FROM kept)
        """
    static var bindingDataTypes: [PostgresDataType] {
        [.text, .text, .uuid, .text, .text, .bytea, .int4, .text, .text, .text, .bytea, .timestamptz, .timestamptz]
    }
    let answer: KeptAnswer, scope: IdempotencyScope, key: String, now: Date, cutoff: Date

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 13)
        bindings.append(scope.name)
        bindings.append(key)
        bindings.append(scope.user)
        bindings.append(answer.method)
        bindings.append(answer.target)
        bindings.append(ByteBuffer(bytes: answer.requestHash))
        bindings.append(Int32(answer.status))
        bindings.append(answer.contentType)
        bindings.append(answer.location)
        bindings.append(answer.etag)
        bindings.append(answer.body)
        bindings.append(now)
        bindings.append(cutoff)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> (Bool, Bool) { try row.decode((Bool, Bool).self) }
}
