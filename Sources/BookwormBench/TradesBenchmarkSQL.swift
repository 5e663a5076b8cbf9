/// SQL for `BookwormBench trades`: seeding a long trade history, resetting the contention data,
/// and pgbench's copy of the service's request transaction.
enum TradesBenchmarkSQL {
    /// Trades for `username`'s copies until they have `count`: one in twenty still waiting for an
    /// answer (those list first), the rest declined or completed, one a minute back in time.
    static func seedIncoming(username: String, count: Int) -> String {
        """
        WITH me AS (SELECT id FROM users WHERE username = '\(username)'),
        have AS (SELECT count(*) AS n FROM trades WHERE owner_id = (SELECT id FROM me)),
        picked AS (
            SELECT c.id, c.book_id, c.owner_id, row_number() OVER () + (SELECT n FROM have) AS n
            FROM copies c
            WHERE c.owner_id <> (SELECT id FROM me)
              AND NOT EXISTS (SELECT 1 FROM trades t WHERE t.copy_id = c.id AND t.owner_id = (SELECT id FROM me))
            LIMIT greatest(0, \(count) - (SELECT n FROM have))
        )
        INSERT INTO trades (kind, state, copy_id, book_id, requester_id, owner_id, created_at, updated_at, completed_at, decline_reason)
        SELECT 'gift', CASE WHEN n % 20 = 0 THEN 'requested' WHEN n % 3 = 0 THEN 'completed' ELSE 'declined' END,
               p.id, p.book_id, p.owner_id, (SELECT id FROM me), now() - n * interval '1 minute', now() - n * interval '1 minute',
               CASE WHEN n % 20 <> 0 AND n % 3 = 0 THEN now() - n * interval '1 minute' END,
               CASE WHEN n % 20 <> 0 AND n % 3 <> 0 THEN 'busy' END
        FROM picked p
        """
    }

    /// Fresh copies for the contention phase: the lender's old trades and copies go, `count` new
    /// copies come, and the targets/requesters tables pgbench picks from are refilled.
    static func resetContention(lender: String, borrowerPrefix: String, copies count: Int) -> String {
        """
        DELETE FROM trades WHERE owner_id = (SELECT id FROM users WHERE username = '\(lender)');
        DELETE FROM copies WHERE owner_id = (SELECT id FROM users WHERE username = '\(lender)');
        UPDATE users SET email_verified_at = now() WHERE username = '\(lender)' OR username LIKE '\(borrowerPrefix)%';
        INSERT INTO copies (owner_id, book_id, condition)
            SELECT (SELECT id FROM users WHERE username = '\(lender)'), b.id, 'good' FROM books b ORDER BY b.id LIMIT \(count);
        CREATE TABLE IF NOT EXISTS bench_trade_targets (n int PRIMARY KEY, copy_id uuid NOT NULL, owner_id uuid NOT NULL);
        CREATE TABLE IF NOT EXISTS bench_trade_requesters (n int PRIMARY KEY, user_id uuid NOT NULL);
        TRUNCATE bench_trade_targets, bench_trade_requesters;
        INSERT INTO bench_trade_targets
            SELECT row_number() OVER (ORDER BY id), id, owner_id FROM copies WHERE owner_id = (SELECT id FROM users WHERE username = '\(lender)');
        INSERT INTO bench_trade_requesters
            SELECT row_number() OVER (ORDER BY username), id FROM users WHERE username LIKE '\(borrowerPrefix)%';
        """
    }

    /// What `POST /v1/trades` runs in its transaction (lock the copy, check blocks and an open
    /// trade, insert the trade, its event and the owner's mail, read the trade back), as one
    /// skilled hand would write it: the three inserts in one statement.
    static func requestScript(copies: Int, requesters: Int) -> String {
        """
        \\set c random(1, \(copies))
        \\set r random(1, \(requesters))
        SELECT copy_id, owner_id FROM bench_trade_targets WHERE n = :c \\gset
        SELECT user_id AS requester FROM bench_trade_requesters WHERE n = :r \\gset
        BEGIN;
        SELECT id, owner_id, book_id, status FROM copies WHERE id = ANY(ARRAY[':copy_id'::uuid]) ORDER BY id FOR UPDATE;
        SELECT 1 FROM blocks WHERE (blocker_id = ':requester' AND blocked_id = ':owner_id') OR (blocker_id = ':owner_id' AND blocked_id = ':requester');
        SELECT 1 FROM trades WHERE requester_id = ':requester' AND copy_id = ':copy_id' AND state IN ('requested', 'accepted');
        WITH t AS (
            INSERT INTO trades (kind, copy_id, book_id, requester_id, owner_id, created_at, updated_at, expires_at)
            SELECT 'gift', c.id, c.book_id, ':requester', c.owner_id, now(), now(), now() + interval '14 days' FROM copies c WHERE c.id = ':copy_id'
            ON CONFLICT (requester_id, copy_id) WHERE state IN ('requested', 'accepted') DO NOTHING
            RETURNING id
        ), e AS (
            INSERT INTO trade_events (trade_id, seq, action, state, by_id, at) SELECT id, 1, 'request', 'requested', ':requester', now() FROM t
        )
        INSERT INTO outbox_messages (message_id, kind, envelope_from, recipient, subject, content, next_attempt_at)
        SELECT '<' || gen_random_uuid() || '@bench>', 'trade', 'bench@example.org', 'owner@example.org', 'someone asks', 'body', now() FROM t;
        SELECT t.id, t.kind, t.state, b.title, r.username, o.username FROM trades t JOIN books b ON b.id = t.book_id
            JOIN users r ON r.id = t.requester_id JOIN users o ON o.id = t.owner_id
            WHERE t.requester_id = ':requester' AND t.copy_id = ':copy_id' AND t.state IN ('requested', 'accepted');
        COMMIT;
        """
    }
}
