-- Trust: Google identities, links behind the verification mail, reports, suspension, and the
-- admin audit log.

-- An account made by Google sign-in has no password until its owner sets one (by reset).
ALTER TABLE users ALTER COLUMN password_hash DROP NOT NULL;
ALTER TABLE users ADD COLUMN suspended_at timestamptz,
                  ADD COLUMN suspension_reason text CHECK (char_length(suspension_reason) <= 500);
-- Every search for other people's things asks "is this owner suspended?" per candidate: this
-- index holds only the suspended (usually none), so the probe is nearly free.
CREATE INDEX users_suspended_idx ON users (id) WHERE suspended_at IS NOT NULL;

-- Keyed by what the provider vouches for (its stable subject), never by email.
CREATE TABLE identities (
    provider    text NOT NULL CHECK (provider IN ('google')),
    subject     text NOT NULL CHECK (char_length(subject) BETWEEN 1 AND 255),
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    email       text CHECK (char_length(email) <= 254),
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (provider, subject)
);
CREATE UNIQUE INDEX identities_user_provider_key ON identities (user_id, provider);

-- The link in the verification mail (the 6-digit code stays for apps). Only hashes are kept.
CREATE TABLE email_links (
    token_hash  bytea PRIMARY KEY,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);
CREATE INDEX email_links_user_idx ON email_links (user_id);

-- Hidden by reports until an admin decides; the owner still sees it.
ALTER TABLE copies ADD COLUMN hidden_at timestamptz;
ALTER TABLE posts ADD COLUMN hidden_at timestamptz;

CREATE TABLE reports (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    reporter_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    target_kind     text NOT NULL CHECK (target_kind IN ('user', 'copy', 'post')),
    -- the user's, copy's or post's id; no foreign key, so a report outlives a deleted post
    target_id       uuid NOT NULL,
    -- whose the target is: the one a `suspend` resolution suspends
    target_user_id  uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    reason          text NOT NULL CHECK (reason IN ('spam', 'abuse', 'fraud', 'other')),
    details         text CHECK (char_length(details) <= 1000),
    status          text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'dismissed', 'removed', 'suspended')),
    created_at      timestamptz NOT NULL,
    resolved_at     timestamptz,
    CHECK ((status = 'open') = (resolved_at IS NULL))
);
-- One open report per reporter and target: the race between two taps is closed here.
CREATE UNIQUE INDEX reports_one_open_key ON reports (reporter_id, target_kind, target_id) WHERE status = 'open';
CREATE INDEX reports_open_target_idx ON reports (target_kind, target_id) WHERE status = 'open';
CREATE INDEX reports_queue_idx ON reports (status, created_at, id);
CREATE INDEX reports_target_user_idx ON reports (target_user_id);

-- Who did what to whom and why, for every admin action. Targets are named as the admin named
-- them (a username, a report id), not by foreign key: the record outlives what it names.
CREATE TABLE admin_audit (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL,
    actor       text NOT NULL,
    host        text NOT NULL,
    action      text NOT NULL,
    target      text NOT NULL,
    reason      text,
    details     jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX admin_audit_at_idx ON admin_audit (at DESC, id DESC);
