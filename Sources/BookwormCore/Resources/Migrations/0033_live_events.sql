-- Live updates: every API process holds `LISTEN events` and tells its open streams.
--
-- A change to a user's sync scope says so on the channel, with the user and the writing
-- transaction (`s <user> <xid>`): the process pokes that user's streams once the sync horizon
-- has passed the transaction, so the pull a poke causes always finds the change. PostgreSQL
-- delivers a notification at commit (never for a rollback) and sends one payload once per
-- transaction, so a transaction that changes a hundred rows of one user pokes them once.
CREATE OR REPLACE FUNCTION bookworm_sync_log(p_user uuid, p_kind text, p_object uuid, p_op text) RETURNS void
    LANGUAGE sql AS $$
    SELECT pg_notify('events', 's ' || p_user::text || ' ' || pg_current_xact_id()::text);
    INSERT INTO sync_changes AS s (user_id, kind, object_id, op) VALUES (p_user, p_kind, p_object, p_op)
    ON CONFLICT (user_id, kind, object_id) DO UPDATE
        SET op = EXCLUDED.op, xid = EXCLUDED.xid, id = EXCLUDED.id, changed_at = EXCLUDED.changed_at
$$;

-- A new post with a place (`p <post>`), for the live nearby feeds. Each process reads the post
-- as the feed shows it, after the commit, and sends it only to viewers who may see it.
CREATE FUNCTION posts_notify_live() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('events', 'p ' || NEW.id::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER posts_live AFTER INSERT ON posts
    FOR EACH ROW WHEN (NEW.cell IS NOT NULL) EXECUTE FUNCTION posts_notify_live();
