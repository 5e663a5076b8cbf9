import Foundation
import Logging
import PostgresNIO

/// A job as a runner claims it.
package struct ClaimedJob: Sendable {
    package let id: UUID
    package let kind: String
    package let key: String
    package let attempts: Int
}

/// What a handler wants done with its job once it has run.
package enum JobOutcome: Sendable, Equatable {
    /// Finished for good: the row goes.
    case done
    /// A recurring job: run again at this time.
    case again(at: Date)
    /// Failed for now: try again at this time (the attempts so far still count).
    case retry(at: Date, reason: String)
}

/// SQL for the `jobs` table: claimed in batches with `FOR UPDATE SKIP LOCKED` and a lease, as the
/// outbox is, so any number of worker processes share it and a crashed one's jobs come due again.
package struct JobStore: Sendable {
    let client: Database
    let logger: Logger
    let clock: any AppClock

    package init(client: Database, logger: Logger, clock: any AppClock) {
        self.client = client
        self.logger = logger
        self.clock = clock
    }

    /// Makes sure a recurring job exists (first run at `at`); an existing row keeps its schedule.
    package func ensure(kind: String, key: String, at: Date) async throws {
        try await client.query("""
            INSERT INTO jobs (kind, key, run_at) VALUES (\(kind), \(key), \(at))
            ON CONFLICT (kind, key) DO NOTHING
            """, logger: logger)
    }

    /// A one-off job, due at once on any worker's clock, queued in the caller's transaction so it
    /// exists exactly when the change that needs it does.
    package static func enqueue(kind: String, key: String, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query("INSERT INTO jobs (kind, key, run_at) VALUES (\(kind), \(key), '-infinity')", logger: logger)
    }

    /// Up to `batch` due jobs, taken from each kind in turn (its oldest first), in that order:
    /// one-off jobs are all due at `-infinity`, so by due time alone a backlog of one kind (the
    /// wish alerts of 100,000 imported copies) made every other kind wait behind all of it,
    /// an import's next chunks included.
    func claim(kinds: [String], worker: UUID, batch: Int, lease: TimeInterval) async throws -> [ClaimedJob] {
        let now = clock.now()
        let rows = try await client.query("""
            WITH due AS (
                SELECT picked.id, row_number() OVER (ORDER BY picked.round, picked.run_at) AS turn FROM unnest(\(kinds)::text[]) AS k(kind)
                CROSS JOIN LATERAL (
                    SELECT oldest.id, oldest.run_at, row_number() OVER (ORDER BY oldest.run_at) AS round FROM (
                        SELECT id, run_at FROM jobs
                        WHERE kind = k.kind AND run_at <= \(now) AND (lease_until IS NULL OR lease_until < \(now))
                        ORDER BY run_at
                        LIMIT \(batch)
                        FOR UPDATE SKIP LOCKED) oldest
                ) picked
                ORDER BY turn
                LIMIT \(batch)
            )
            UPDATE jobs j SET lease_owner = \(worker), lease_until = \(now) + make_interval(secs => \(lease)),
                              attempts = j.attempts + 1
            FROM due WHERE j.id = due.id
            RETURNING j.id, j.kind, j.key, j.attempts, due.turn
            """, logger: logger)
        var jobs: [(job: ClaimedJob, turn: Int)] = []
        for try await (id, kind, key, attempts, turn) in rows.decode((UUID, String, String, Int, Int).self) {
            jobs.append((ClaimedJob(id: id, kind: kind, key: key, attempts: attempts), turn))
        }
        return jobs.sorted { $0.turn < $1.turn }.map(\.job)
    }

    /// A fresh lease on those of `ids` this worker still holds; the ids it still holds. A job
    /// whose lease ran out meanwhile may have been claimed (and run) by another worker.
    func renew(_ ids: [UUID], worker: UUID, lease: TimeInterval) async throws -> Set<UUID> {
        let rows = try await client.query("""
            UPDATE jobs SET lease_until = \(clock.now()) + make_interval(secs => \(lease))
            WHERE id = ANY(\(ids)) AND lease_owner = \(worker)
            RETURNING id
            """, logger: logger)
        var held: Set<UUID> = []
        for try await id in rows.decode(UUID.self) { held.insert(id) }
        return held
    }

    /// Only while this worker still holds the lease: a job it lost is someone else's now.
    func finish(_ job: ClaimedJob, worker: UUID, outcome: JobOutcome) async throws {
        switch outcome {
        case .done:
            try await client.query("DELETE FROM jobs WHERE id = \(job.id) AND lease_owner = \(worker)", logger: logger)
        case .again(let at):
            try await client.query("""
                UPDATE jobs SET run_at = \(at), attempts = 0, lease_owner = NULL, lease_until = NULL, last_error = NULL
                WHERE id = \(job.id) AND lease_owner = \(worker)
                """, logger: logger)
        case .retry(let at, let reason):
            try await retry(job, worker: worker, after: at.timeIntervalSince(clock.now()), error: reason)
        }
    }

    /// A batch's outcomes in one statement, again only for jobs this worker still holds.
    func finish(_ outcomes: [(id: UUID, outcome: JobOutcome)], worker: UUID) async throws {
        var ids: [UUID] = [], ops: [String] = [], times: [Date] = [], errors: [String] = []
        for (id, outcome) in outcomes {
            ids.append(id)
            switch outcome {
            case .done: ops.append("done"); times.append(clock.now()); errors.append("")
            case .again(let at): ops.append("again"); times.append(at); errors.append("")
            case .retry(let at, let reason): ops.append("retry"); times.append(at); errors.append(String(reason.prefix(1000)))
            }
        }
        try await client.query("""
            WITH o AS (
                SELECT * FROM unnest(\(ids)::uuid[], \(ops)::text[], \(times)::timestamptz[], \(errors)::text[]) AS o(id, op, at, error)
            ), gone AS (
                DELETE FROM jobs j USING o WHERE j.id = o.id AND o.op = 'done' AND j.lease_owner = \(worker)
            )
            UPDATE jobs j SET run_at = o.at, lease_owner = NULL, lease_until = NULL,
                              attempts = CASE WHEN o.op = 'again' THEN 0 ELSE j.attempts END, last_error = NULLIF(o.error, '')
            FROM o WHERE j.id = o.id AND o.op <> 'done' AND j.lease_owner = \(worker)
            """, logger: logger)
    }

    func retry(_ job: ClaimedJob, worker: UUID, after delay: TimeInterval, error: String) async throws {
        try await client.query("""
            UPDATE jobs SET run_at = \(clock.now().addingTimeInterval(delay)), lease_owner = NULL, lease_until = NULL,
                            last_error = \(String(error.prefix(1000)))
            WHERE id = \(job.id) AND lease_owner = \(worker)
            """, logger: logger)
    }
}
