-- A new wish hears of the copies already on offer near it, not only of those that become
-- available later (the `alerts.copy` fan-out): someone who wishes for a book that is on offer
-- a kilometre away is told at once. Queued in the wish's transaction by a trigger, as the
-- copies' job is, so no way of making a wish (the API, an import) can forget it; the job
-- (`alerts.wish`) writes alerts for the nearest few copies, unique per wish and copy as
-- every alert is, so a copy becoming available at the same time alerts the wish once.
CREATE FUNCTION wishes_queue_alerts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('bookworm.seeding', true) = 'on' THEN
        RETURN NULL;
    END IF;
    INSERT INTO jobs (kind, key, run_at) VALUES ('alerts.wish', NEW.id::text, '-infinity')
    ON CONFLICT (kind, key) DO UPDATE
        SET run_at = '-infinity', lease_owner = NULL, lease_until = NULL, attempts = 0;
    RETURN NULL;
END
$$;
CREATE TRIGGER wishes_queue_alerts AFTER INSERT ON wishes
    FOR EACH ROW EXECUTE FUNCTION wishes_queue_alerts();
