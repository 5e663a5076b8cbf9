-- Accounts: users, their sessions (only token hashes stored) and the shared throttle log.

CREATE TABLE users (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    email              text NOT NULL,
    -- trimmed, lower-cased: the form emails are compared in
    email_normalized   text NOT NULL,
    username           text NOT NULL,
    display_name       text,
    bio                text,
    password_hash      text NOT NULL,
    email_verified_at  timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT users_username_shape CHECK (username ~ '^[a-z0-9_]{3,30}$'),
    CONSTRAINT users_email_length CHECK (char_length(email) <= 254)
);
CREATE UNIQUE INDEX users_email_normalized_key ON users (email_normalized);
CREATE UNIQUE INDEX users_username_key ON users (lower(username));

CREATE TABLE sessions (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token_hash     bytea NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    last_used_at   timestamptz NOT NULL DEFAULT now(),
    idle_expires_at     timestamptz NOT NULL,
    absolute_expires_at timestamptz NOT NULL,
    revoked_at     timestamptz
);
CREATE UNIQUE INDEX sessions_token_hash_key ON sessions (token_hash);
CREATE INDEX sessions_user_active_idx ON sessions (user_id) WHERE revoked_at IS NULL;

-- One row per counted event (a failed login, a registration), keyed by what is throttled
-- ('login:account:<id>', 'login:ip:<addr>', ...). Shared by every API instance.
CREATE TABLE throttle_events (
    key          text NOT NULL,
    occurred_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX throttle_events_key_time_idx ON throttle_events (key, occurred_at);
