-- Mail: a transactional outbox (a row per message, written in the transaction of the change
-- that causes it), what causes mail (email codes, password resets, contact requests), blocks,
-- and the addresses a server refused for good.

CREATE TABLE outbox_messages (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- RFC 5322 Message-ID, fixed at insert and in `content`, so a retried message is the same message.
    message_id        text NOT NULL UNIQUE,
    kind              text NOT NULL CHECK (kind IN ('verify_email', 'password_reset', 'contact')),
    envelope_from     text NOT NULL,
    recipient         text NOT NULL,
    subject           text NOT NULL,
    -- The whole message as sent: headers and body, CRLF line ends.
    content           text NOT NULL,
    status            text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'sent', 'failed')),
    attempts          int NOT NULL DEFAULT 0,
    next_attempt_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- A claimed row belongs to one worker until the lease ends; a crashed worker's lease runs out.
    lease_owner       uuid,
    lease_expires_at  timestamptz,
    last_error        text,
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    sent_at           timestamptz
);
CREATE INDEX outbox_due_idx ON outbox_messages (next_attempt_at) WHERE status = 'queued';
CREATE INDEX outbox_status_idx ON outbox_messages (status, created_at DESC, id DESC);

-- Wakes listening workers as soon as a message is committed (they also poll, in case a
-- notification is missed while reconnecting).
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('outbox', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER outbox_messages_notify AFTER INSERT ON outbox_messages
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

-- An address a server answered 5xx for: no further mail goes to it.
CREATE TABLE mail_suppressions (
    address     text PRIMARY KEY,
    reason      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- The 6-digit code that proves an address; only its hash is kept.
CREATE TABLE email_verifications (
    user_id     uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    code_hash   bytea NOT NULL,
    attempts    int NOT NULL DEFAULT 0,
    expires_at  timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Single-use password reset tokens; only their SHA-256 is kept.
CREATE TABLE password_resets (
    token_hash  bytea PRIMARY KEY,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX password_resets_user_idx ON password_resets (user_id);

CREATE TABLE blocks (
    blocker_id  uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    blocked_id  uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (blocker_id, blocked_id),
    CHECK (blocker_id <> blocked_id)
);
CREATE INDEX blocks_blocked_idx ON blocks (blocked_id, blocker_id);

CREATE TABLE contact_requests (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    sender_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    recipient_id  uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    copy_id       uuid REFERENCES copies (id) ON DELETE SET NULL,
    post_id       uuid REFERENCES posts (id) ON DELETE SET NULL,
    book_title    text,
    message       text NOT NULL CHECK (char_length(message) BETWEEN 1 AND 2000),
    share_email   boolean NOT NULL,
    outbox_id     uuid NOT NULL REFERENCES outbox_messages (id),
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX contact_requests_sender_idx ON contact_requests (sender_id, created_at DESC, id DESC);
CREATE INDEX contact_requests_pair_idx ON contact_requests (sender_id, recipient_id, created_at);
