-- A writer hints that its changes need no horizon read: `h <xid>` on `events` when its
-- snapshot's oldest running transaction is its own or newer, usually before its `s`
-- notifications (a later statement may hint where an earlier one did not: one heard after them
-- costs a read). Every transaction below a snapshot's xmin had ended when it was taken, whenever
-- that was, so every one below this transaction's id has ended once it commits, and a poke for
-- it (or for anything below it) is safe without asking for the horizon (`LivePokes`). That read
-- took about a millisecond of a loaded machine's time from a commit to its first event.
--
-- The oldest running transaction is the cluster's: one in another database withholds the hint,
-- and the dispatcher reads the horizon as before. PostgreSQL sends a payload once per
-- transaction, however many rows repeat it. One statement as before (20,000 rows updated:
-- 1.18-1.21 s before, 1.17-1.23 s after).
CREATE OR REPLACE FUNCTION bookworm_sync_log(p_user uuid, p_kind text, p_object uuid, p_op text) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM CASE WHEN pg_snapshot_xmin(t.snap) >= t.x THEN pg_notify('events', 'h ' || t.x::text) END,
            pg_notify('events', 's ' || p_user::text || ' ' || t.x::text)
    FROM (SELECT pg_current_xact_id() AS x, pg_current_snapshot() AS snap) t;
    INSERT INTO sync_changes AS s (user_id, kind, object_id, op) VALUES (p_user, p_kind, p_object, p_op)
    ON CONFLICT (user_id, kind, object_id) DO UPDATE
        SET op = EXCLUDED.op, xid = EXCLUDED.xid, id = EXCLUDED.id, changed_at = EXCLUDED.changed_at;
END
$$;
