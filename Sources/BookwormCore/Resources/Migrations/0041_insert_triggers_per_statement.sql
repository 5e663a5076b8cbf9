-- New copies and readings are logged for sync, and new copies queued for their alerts, once per
-- statement from the rows it inserted (a transition table), not once per row: an import's
-- chunk inserts 500 of each in one statement, and the row triggers' PL/pgSQL calls (a
-- function call and three statements a row) were a third of PostgreSQL's time during ten
-- imports at once (`perf`, `AfterTriggerEndQuery`). Updates and deletes keep their row
-- triggers: they pair a row's old and new owner. The same rows, notifications and jobs as
-- before: `s` once per user of the statement (PostgreSQL sends a payload once per transaction
-- anyway) after the transaction's hint (0040), and nothing at all for a statement that inserted
-- nothing (an import's `ON CONFLICT DO NOTHING`).
CREATE FUNCTION bookworm_sync_notify(p_users uuid[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM CASE WHEN pg_snapshot_xmin(t.snap) >= t.x THEN pg_notify('events', 'h ' || t.x::text) END
    FROM (SELECT pg_current_xact_id() AS x, pg_current_snapshot() AS snap) t;
    PERFORM pg_notify('events', 's ' || u::text || ' ' || pg_current_xact_id()::text) FROM unnest(p_users) AS u;
END
$$;

CREATE FUNCTION copies_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM added) THEN
        RETURN NULL;
    END IF;
    PERFORM bookworm_sync_notify(ARRAY(SELECT DISTINCT owner_id FROM added));
    INSERT INTO sync_changes AS s (user_id, kind, object_id, op)
        SELECT owner_id, 'copy', id, 'upsert' FROM added
    ON CONFLICT (user_id, kind, object_id) DO UPDATE
        SET op = EXCLUDED.op, xid = EXCLUDED.xid, id = EXCLUDED.id, changed_at = EXCLUDED.changed_at;
    IF current_setting('bookworm.seeding', true) IS DISTINCT FROM 'on' THEN
        INSERT INTO jobs (kind, key, run_at) SELECT 'alerts.copy', id::text, '-infinity' FROM added WHERE status = 'available'
        ON CONFLICT (kind, key) DO UPDATE
            SET run_at = '-infinity', lease_owner = NULL, lease_until = NULL, attempts = 0;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION readings_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM added) THEN
        RETURN NULL;
    END IF;
    PERFORM bookworm_sync_notify(ARRAY(SELECT DISTINCT user_id FROM added));
    INSERT INTO sync_changes AS s (user_id, kind, object_id, op)
        SELECT user_id, 'reading', book_id, 'upsert' FROM added
    ON CONFLICT (user_id, kind, object_id) DO UPDATE
        SET op = EXCLUDED.op, xid = EXCLUDED.xid, id = EXCLUDED.id, changed_at = EXCLUDED.changed_at;
    RETURN NULL;
END
$$;

DROP TRIGGER copies_sync ON copies;
CREATE TRIGGER copies_sync AFTER UPDATE OR DELETE ON copies FOR EACH ROW EXECUTE FUNCTION sync_track('copy');
DROP TRIGGER copies_queue_alerts ON copies;
CREATE TRIGGER copies_queue_alerts AFTER UPDATE OF status, owner_id ON copies
    FOR EACH ROW EXECUTE FUNCTION copies_queue_alerts();
CREATE TRIGGER copies_inserted AFTER INSERT ON copies
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION copies_inserted();

DROP TRIGGER readings_sync ON readings;
CREATE TRIGGER readings_sync AFTER UPDATE OR DELETE ON readings FOR EACH ROW EXECUTE FUNCTION sync_track('reading');
CREATE TRIGGER readings_inserted AFTER INSERT ON readings
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION readings_inserted();
