-- Each API process keeps the sessions it has just looked up for a few seconds (`SessionCache`),
-- so a signed-in request need not read its session row every time. Whatever could make a kept
-- session wrong says so on the `sessions` channel, with the user's id, and every process drops
-- that user's sessions: a session revoked (logout, password change or reset, suspension, a
-- moderator's decision), or a change to the user row a session carries (username, email,
-- verification, suspension, password), or the user erased. Triggers rather than calls from
-- each code path, so that no path that writes these rows (the moderation CLI included) can
-- forget. Delivered at commit, so a rolled-back change drops nothing.
CREATE FUNCTION bookworm_notify_session_owner() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'sessions' THEN
        PERFORM pg_notify('sessions', OLD.user_id::text);
    ELSE
        PERFORM pg_notify('sessions', OLD.id::text);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER sessions_revoked_notify
    AFTER UPDATE OF revoked_at ON sessions
    FOR EACH ROW WHEN (OLD.revoked_at IS DISTINCT FROM NEW.revoked_at)
    EXECUTE FUNCTION bookworm_notify_session_owner();

CREATE TRIGGER users_session_fields_notify
    AFTER UPDATE OF email, username, display_name, bio, password_hash, email_verified_at, alerts, suspended_at ON users
    FOR EACH ROW EXECUTE FUNCTION bookworm_notify_session_owner();

CREATE TRIGGER users_erased_notify
    AFTER DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION bookworm_notify_session_owner();
