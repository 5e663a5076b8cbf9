-- Push notifications: the phones a user signed in on, and which kinds of push they want.
--
-- A device belongs to the session that registered it: it goes when that session is revoked
-- (logout, logout-all, a password change, suspension) or deleted (expiry, erasure). A token is
-- one phone, so it is registered once; another account registering it takes it over.
CREATE TABLE devices (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    session_id   uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    platform     text NOT NULL CHECK (platform IN ('apns', 'fcm')),
    environment  text NOT NULL CHECK (environment IN ('production', 'sandbox')),
    token        text NOT NULL CHECK (length(token) BETWEEN 1 AND 4096),
    created_at   timestamptz NOT NULL,
    UNIQUE (platform, token)
);
CREATE INDEX devices_user_idx ON devices (user_id, created_at, id);
CREATE INDEX devices_session_idx ON devices (session_id);

CREATE FUNCTION devices_follow_session() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM devices WHERE session_id = NEW.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER sessions_revoked_devices
    AFTER UPDATE OF revoked_at ON sessions
    FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
    EXECUTE FUNCTION devices_follow_session();

-- A device's queued pushes go with it: they name the account's trades and books, and nobody may
-- read them once the phone is signed out, moved to another account or erased.
CREATE FUNCTION devices_drop_pushes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM jobs WHERE kind = 'push' AND (payload->>'device')::uuid IN (SELECT id FROM gone);
    RETURN NULL;
END
$$;
CREATE TRIGGER devices_drop_pushes AFTER DELETE ON devices
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION devices_drop_pushes();

-- The kinds of push a user turned off (`trades`, `alerts`, `contact`); all are on by default.
ALTER TABLE users ADD COLUMN push_off text[] NOT NULL DEFAULT '{}'
    CHECK (push_off <@ ARRAY['trades', 'alerts', 'contact']);

-- A session carries the user's columns, so a change to them tells every process (0021).
DROP TRIGGER users_session_fields_notify ON users;
CREATE TRIGGER users_session_fields_notify
    AFTER UPDATE OF email, username, display_name, bio, password_hash, email_verified_at, alerts, suspended_at, push_off ON users
    FOR EACH ROW EXECUTE FUNCTION bookworm_notify_session_owner();

-- A runner of one kind (the push worker) claims by kind in run order: without this, a claim read
-- every row of the kind, dead ones too, and sorted them (20 to 140 ms a batch of 500 at 10,000).
CREATE INDEX jobs_kind_due_idx ON jobs (kind, run_at);

-- An event pushes to everyone's devices through one INSERT … SELECT, which inserts nothing for
-- someone without a phone: such a statement must not wake every runner of every process.
CREATE OR REPLACE FUNCTION jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM added) THEN
        PERFORM pg_notify('jobs', '');
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER jobs_notify ON jobs;
CREATE TRIGGER jobs_notify AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION jobs_notify();
