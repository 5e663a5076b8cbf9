-- Account deletion: the erased person is replaced, where others' history needs someone (their
-- completed trades, ratings, a copy's journey), by a placeholder "Deleted user" of its own; the
-- username is held for a while so nobody can pose as them; a confirmation mail goes out.

ALTER TABLE outbox_messages DROP CONSTRAINT outbox_messages_kind_check;
ALTER TABLE outbox_messages ADD CONSTRAINT outbox_messages_kind_check
    CHECK (kind IN ('verify_email', 'password_reset', 'contact', 'trade', 'alert', 'account_deleted'));

-- Set on a placeholder: no email, no password, nobody behind it.
ALTER TABLE users ADD COLUMN erased_at timestamptz;

-- A username nobody may take until `until` (housekeeping lifts holds on the app's clock).
CREATE TABLE username_holds (
    username  text PRIMARY KEY,
    until     timestamptz NOT NULL
);

-- Registration and renames wait on the same lock as an erasure holding that name, then look
-- again (each statement in a volatile function sees what committed meanwhile): a name is never
-- taken between the erasure's delete and its hold.
CREATE FUNCTION users_respect_username_holds() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('username:' || lower(NEW.username)));
    IF EXISTS (SELECT 1 FROM username_holds WHERE username = lower(NEW.username)) THEN
        RAISE EXCEPTION 'username % is held', NEW.username
            USING ERRCODE = 'unique_violation', CONSTRAINT = 'users_username_key';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER users_username_holds BEFORE INSERT OR UPDATE OF username ON users
    FOR EACH ROW EXECUTE FUNCTION users_respect_username_holds();
