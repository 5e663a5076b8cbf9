-- Delta sync: one change row per (user, kind, object), moved forward by triggers on every table a
-- client keeps of its user, in the transaction that makes the change.
--
-- A row carries the writing transaction's id (xid8). A reader serves only rows of transactions
-- older than the oldest one still running (`pg_snapshot_xmin`): those have all ended, so a
-- transaction that took its number first and commits last is never skipped. Rows are paged by
-- (xid, id). A second change of the same object moves its one row forward (write-time
-- compaction): a client behind it gets the object's latest state once.

-- The data epoch in every sync token. A restore from a dump lands in another database (another
-- oid, often another cluster), so the token's epoch is this random id hashed with both.
CREATE TABLE sync_state (
    only_row    boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    epoch       uuid NOT NULL DEFAULT gen_random_uuid(),
    -- Tokens at or below this transaction may have missed a purged tombstone: 410.
    purged_xid  xid8 NOT NULL DEFAULT '0'
);
INSERT INTO sync_state DEFAULT VALUES;

CREATE FUNCTION bookworm_sync_epoch() RETURNS text LANGUAGE sql STABLE AS $$
    SELECT left(md5(s.epoch::text || ':' || c.system_identifier::text || ':' || d.oid::text), 16)
    FROM sync_state s, pg_control_system() c, pg_database d
    WHERE d.datname = current_database()
$$;

-- A block gets an id of its own, so that its tombstone names the block and not the person blocked
-- (who may erase their account: nothing may keep their id then).
ALTER TABLE blocks ADD COLUMN id uuid NOT NULL DEFAULT gen_random_uuid();
ALTER TABLE blocks ADD CONSTRAINT blocks_id_key UNIQUE (id);

CREATE SEQUENCE sync_changes_id_seq AS bigint;
CREATE TABLE sync_changes (
    user_id    uuid NOT NULL,
    kind       text NOT NULL CHECK (kind IN ('copy', 'pin', 'reading', 'wish', 'trade', 'post', 'block')),
    object_id  uuid NOT NULL,
    -- What the change did to this user's view: the reader checks it again against the object.
    op         text NOT NULL CHECK (op IN ('upsert', 'delete')),
    xid        xid8 NOT NULL DEFAULT pg_current_xact_id(),
    id         bigint NOT NULL DEFAULT nextval('sync_changes_id_seq'),
    changed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (user_id, kind, object_id)
);
ALTER SEQUENCE sync_changes_id_seq OWNED BY sync_changes.id;
CREATE INDEX sync_changes_page_idx ON sync_changes (user_id, xid, id);
CREATE INDEX sync_changes_tombstones_idx ON sync_changes (changed_at) WHERE op = 'delete';

CREATE FUNCTION bookworm_sync_log(p_user uuid, p_kind text, p_object uuid, p_op text) RETURNS void
    LANGUAGE sql AS $$
    INSERT INTO sync_changes AS s (user_id, kind, object_id, op) VALUES (p_user, p_kind, p_object, p_op)
    ON CONFLICT (user_id, kind, object_id) DO UPDATE
        SET op = EXCLUDED.op, xid = EXCLUDED.xid, id = EXCLUDED.id, changed_at = EXCLUDED.changed_at
$$;

-- One trigger function for every tracked table (TG_ARGV[0]: the kind; for trades TG_ARGV[1]
-- names the side). A row that moves to another user leaves the first one's view: a tombstone
-- there. Only the branch of the table at hand is ever planned, so each names its own columns.
CREATE FUNCTION sync_track() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    old_user uuid;
    old_id uuid;
    new_user uuid;
    new_id uuid;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        CASE TG_ARGV[0]
            WHEN 'copy' THEN old_user := OLD.owner_id; old_id := OLD.id;
            WHEN 'pin' THEN old_user := OLD.owner_id; old_id := OLD.id;
            WHEN 'reading' THEN old_user := OLD.user_id; old_id := OLD.book_id;
            WHEN 'wish' THEN old_user := OLD.user_id; old_id := OLD.id;
            WHEN 'post' THEN old_user := OLD.author_id; old_id := OLD.id;
            WHEN 'block' THEN old_user := OLD.blocker_id; old_id := OLD.id;
            WHEN 'trade' THEN
                old_id := OLD.id;
                old_user := CASE TG_ARGV[1] WHEN 'owner' THEN OLD.owner_id ELSE OLD.requester_id END;
        END CASE;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        CASE TG_ARGV[0]
            WHEN 'copy' THEN new_user := NEW.owner_id; new_id := NEW.id;
            WHEN 'pin' THEN new_user := NEW.owner_id; new_id := NEW.id;
            WHEN 'reading' THEN new_user := NEW.user_id; new_id := NEW.book_id;
            WHEN 'wish' THEN new_user := NEW.user_id; new_id := NEW.id;
            WHEN 'post' THEN new_user := NEW.author_id; new_id := NEW.id;
            WHEN 'block' THEN new_user := NEW.blocker_id; new_id := NEW.id;
            WHEN 'trade' THEN
                new_id := NEW.id;
                new_user := CASE TG_ARGV[1] WHEN 'owner' THEN NEW.owner_id ELSE NEW.requester_id END;
        END CASE;
    END IF;
    IF old_user IS NOT NULL AND (new_user IS DISTINCT FROM old_user OR new_id IS DISTINCT FROM old_id) THEN
        PERFORM bookworm_sync_log(old_user, TG_ARGV[0], old_id, 'delete');
    END IF;
    IF new_user IS NOT NULL THEN
        PERFORM bookworm_sync_log(new_user, TG_ARGV[0], new_id, 'upsert');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER copies_sync AFTER INSERT OR UPDATE OR DELETE ON copies FOR EACH ROW EXECUTE FUNCTION sync_track('copy');
CREATE TRIGGER pins_sync AFTER INSERT OR UPDATE OR DELETE ON pins FOR EACH ROW EXECUTE FUNCTION sync_track('pin');
CREATE TRIGGER readings_sync AFTER INSERT OR UPDATE OR DELETE ON readings FOR EACH ROW EXECUTE FUNCTION sync_track('reading');
CREATE TRIGGER wishes_sync AFTER INSERT OR UPDATE OR DELETE ON wishes FOR EACH ROW EXECUTE FUNCTION sync_track('wish');
CREATE TRIGGER posts_sync AFTER INSERT OR UPDATE OR DELETE ON posts FOR EACH ROW EXECUTE FUNCTION sync_track('post');
CREATE TRIGGER blocks_sync AFTER INSERT OR UPDATE OR DELETE ON blocks FOR EACH ROW EXECUTE FUNCTION sync_track('block');
-- A trade belongs to both sides.
CREATE TRIGGER trades_sync_requester AFTER INSERT OR UPDATE OR DELETE ON trades
    FOR EACH ROW EXECUTE FUNCTION sync_track('trade', 'requester');
CREATE TRIGGER trades_sync_owner AFTER INSERT OR UPDATE OR DELETE ON trades
    FOR EACH ROW EXECUTE FUNCTION sync_track('trade', 'owner');

-- What exists already is one change each, so that a first sync (the log from its start) has it all.
INSERT INTO sync_changes (user_id, kind, object_id, op)
    SELECT owner_id, 'copy', id, 'upsert' FROM copies
    UNION ALL SELECT owner_id, 'pin', id, 'upsert' FROM pins
    UNION ALL SELECT user_id, 'reading', book_id, 'upsert' FROM readings
    UNION ALL SELECT user_id, 'wish', id, 'upsert' FROM wishes
    UNION ALL SELECT author_id, 'post', id, 'upsert' FROM posts
    UNION ALL SELECT blocker_id, 'block', id, 'upsert' FROM blocks
    UNION ALL SELECT requester_id, 'trade', id, 'upsert' FROM trades
    UNION ALL SELECT owner_id, 'trade', id, 'upsert' FROM trades;
