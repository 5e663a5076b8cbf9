-- Wishes and alerts: a book I want, measured from a pin of mine, and one alert per wish and copy
-- that satisfied it when the copy became available.

-- How a user wants alerts mailed: one mail each, one digest a day at most, or none.
ALTER TABLE users ADD COLUMN alerts text NOT NULL DEFAULT 'daily' CHECK (alerts IN ('instant', 'daily', 'off'));

ALTER TABLE outbox_messages DROP CONSTRAINT outbox_messages_kind_check;
ALTER TABLE outbox_messages ADD CONSTRAINT outbox_messages_kind_check
    CHECK (kind IN ('verify_email', 'password_reset', 'contact', 'trade', 'alert'));

-- Conditions from worst to best, so "at least good" is one comparison.
CREATE FUNCTION bookworm_condition_rank(text) RETURNS int
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    AS $$ SELECT array_position(ARRAY['poor', 'fair', 'good', 'like_new', 'new'], $1) $$;

CREATE TABLE wishes (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    book_id        uuid NOT NULL REFERENCES books (id),
    -- The book's work key, copied (books never change): the fan-out and the matches look wishes
    -- up by work; a wish for one edition also checks book_id.
    work_key       text NOT NULL,
    any_edition    boolean NOT NULL DEFAULT true,
    radius_km      float8 NOT NULL CHECK (radius_km > 0 AND radius_km <= 500),
    -- NULL: measured from the wisher's default pin, whichever it is at the time. A deleted pin
    -- falls back to the default one.
    pin_id         uuid REFERENCES pins (id) ON DELETE SET NULL,
    min_condition  text CHECK (min_condition IN ('new', 'like_new', 'good', 'fair', 'poor')),
    created_at     timestamptz NOT NULL,
    UNIQUE (user_id, book_id)
);
CREATE INDEX wishes_work_idx ON wishes (work_key, id);
CREATE INDEX wishes_user_work_idx ON wishes (user_id, work_key);
CREATE INDEX wishes_user_recent_idx ON wishes (user_id, created_at DESC, id DESC);
CREATE INDEX wishes_pin_idx ON wishes (pin_id) WHERE pin_id IS NOT NULL;

CREATE TABLE alerts (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    wish_id      uuid NOT NULL REFERENCES wishes (id) ON DELETE CASCADE,
    copy_id      uuid NOT NULL REFERENCES copies (id) ON DELETE CASCADE,
    -- The wisher, so a user's alerts are one index range.
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    distance_km  float8 NOT NULL,
    created_at   timestamptz NOT NULL,
    -- Set once the alert was mailed (instant or in a digest) or needs no mail (alerts off).
    mailed_at    timestamptz,
    UNIQUE (wish_id, copy_id)
);
CREATE INDEX alerts_user_recent_idx ON alerts (user_id, created_at DESC, id DESC);
CREATE INDEX alerts_copy_idx ON alerts (copy_id);
CREATE INDEX alerts_unmailed_idx ON alerts (user_id) WHERE mailed_at IS NULL;

-- Every way a copy becomes available (listed, set back to available, released by a trade,
-- returned from a loan, given to a new owner) queues its fan-out in the same transaction, so no
-- code path can forget it and a crash cannot lose it. A job already queued (or running) for the
-- copy is made due again and loses its lease, so a change during a run is never dropped. Due at
-- '-infinity': at once on any worker's clock (tests run theirs apart from the wall clock). Bulk
-- demo data (`bookworm seed`) sets `bookworm.seeding` for its transaction and queues nothing.
CREATE FUNCTION copies_queue_alerts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('bookworm.seeding', true) = 'on' THEN
        RETURN NULL;
    END IF;
    IF NEW.status = 'available' AND (TG_OP = 'INSERT' OR OLD.status <> 'available' OR OLD.owner_id <> NEW.owner_id) THEN
        INSERT INTO jobs (kind, key, run_at) VALUES ('alerts.copy', NEW.id::text, '-infinity')
        ON CONFLICT (kind, key) DO UPDATE
            SET run_at = '-infinity', lease_owner = NULL, lease_until = NULL, attempts = 0;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER copies_queue_alerts AFTER INSERT OR UPDATE OF status, owner_id ON copies
    FOR EACH ROW EXECUTE FUNCTION copies_queue_alerts();
