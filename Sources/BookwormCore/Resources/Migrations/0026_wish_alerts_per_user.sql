-- A new wish's look at the copies already on offer (0024) runs once per wisher, not once per
-- wish: an import of 200 wishes, or several made in a row, is one job and one mail, not 200.
-- The `alerts.wish` job is keyed by the user and takes every wish of theirs not yet looked at
-- (`offers_checked`). Wishes made before this migration were looked at by the fan-outs; so are
-- bulk demo rows (`bookworm.seeding`), which keep the default.
ALTER TABLE wishes ADD COLUMN offers_checked boolean NOT NULL DEFAULT true;
CREATE INDEX wishes_offers_unchecked_idx ON wishes (user_id) WHERE NOT offers_checked;

DROP TRIGGER wishes_queue_alerts ON wishes;
DROP FUNCTION wishes_queue_alerts();

-- Before the row is written, so that the flag goes in with it; the job row is made due again
-- and loses its lease if it is queued or running, so a wish made during a run is never missed.
CREATE FUNCTION wishes_queue_alerts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('bookworm.seeding', true) = 'on' THEN
        RETURN NEW;
    END IF;
    NEW.offers_checked := false;
    INSERT INTO jobs (kind, key, run_at) VALUES ('alerts.wish', NEW.user_id::text, '-infinity')
    ON CONFLICT (kind, key) DO UPDATE
        SET run_at = '-infinity', lease_owner = NULL, lease_until = NULL, attempts = 0;
    RETURN NEW;
END
$$;
CREATE TRIGGER wishes_queue_alerts BEFORE INSERT ON wishes
    FOR EACH ROW EXECUTE FUNCTION wishes_queue_alerts();
