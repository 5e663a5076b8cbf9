-- Trades: a request for one copy (gift, swap or loan), its proposals, events, ratings, the
-- copies' changes of owner, and the leased jobs table every background task runs on.

ALTER TABLE copies DROP CONSTRAINT copies_status_check;
ALTER TABLE copies ADD CONSTRAINT copies_status_check
    CHECK (status IN ('available', 'reserved', 'lent', 'traded', 'withdrawn'));

ALTER TABLE outbox_messages DROP CONSTRAINT outbox_messages_kind_check;
ALTER TABLE outbox_messages ADD CONSTRAINT outbox_messages_kind_check
    CHECK (kind IN ('verify_email', 'password_reset', 'contact', 'trade'));

CREATE TABLE trades (
    id                      uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    kind                    text NOT NULL CHECK (kind IN ('gift', 'swap', 'loan')),
    state                   text NOT NULL DEFAULT 'requested'
                            CHECK (state IN ('requested', 'accepted', 'declined', 'cancelled', 'expired', 'completed', 'returned')),
    -- NULL once the copy is deleted (only possible when no trade on it is open); the book stays.
    copy_id                 uuid REFERENCES copies (id) ON DELETE SET NULL,
    offered_copy_id         uuid REFERENCES copies (id) ON DELETE SET NULL,
    book_id                 uuid NOT NULL REFERENCES books (id),
    offered_book_id         uuid REFERENCES books (id),
    requester_id            uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    owner_id                uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    due_on                  date,
    message                 text,
    -- Who made the latest proposal (the request is the requester's first).
    proposal_by             text NOT NULL DEFAULT 'requester' CHECK (proposal_by IN ('requester', 'owner')),
    requester_counters      int NOT NULL DEFAULT 0 CHECK (requester_counters BETWEEN 0 AND 2),
    owner_counters          int NOT NULL DEFAULT 0 CHECK (owner_counters BETWEEN 0 AND 2),
    requester_confirmed_at  timestamptz,
    owner_confirmed_at      timestamptz,
    decline_reason          text,
    created_at              timestamptz NOT NULL,
    -- Last activity: the order of `GET /v1/me/trades` and the start of the expiry window.
    updated_at              timestamptz NOT NULL,
    expires_at              timestamptz,
    completed_at            timestamptz,
    reminded_at             timestamptz,
    overdue_mailed_at       timestamptz,
    -- Whether the trade waits on this side: its list shows those first.
    owner_waiting           boolean GENERATED ALWAYS AS (
        (state = 'requested' AND proposal_by = 'requester')
        OR (state = 'accepted' AND owner_confirmed_at IS NULL)
        OR (state = 'completed' AND kind = 'loan')) STORED,
    requester_waiting       boolean GENERATED ALWAYS AS (
        (state = 'requested' AND proposal_by = 'owner')
        OR (state = 'accepted' AND requester_confirmed_at IS NULL)) STORED,
    CHECK (requester_id <> owner_id),
    CHECK ((kind = 'swap') = (offered_book_id IS NOT NULL)),
    CHECK ((kind = 'loan') = (due_on IS NOT NULL))
);
-- One open trade per requester and copy, whatever the code does.
CREATE UNIQUE INDEX trades_one_open_per_requester_idx ON trades (requester_id, copy_id)
    WHERE state IN ('requested', 'accepted');
CREATE INDEX trades_open_copy_idx ON trades (copy_id) WHERE state IN ('requested', 'accepted');
CREATE INDEX trades_open_offered_idx ON trades (offered_copy_id) WHERE state IN ('requested', 'accepted');
CREATE INDEX trades_owner_list_idx ON trades (owner_id, owner_waiting DESC, updated_at DESC, id DESC);
CREATE INDEX trades_requester_list_idx ON trades (requester_id, requester_waiting DESC, updated_at DESC, id DESC);
CREATE INDEX trades_expiry_idx ON trades (expires_at) WHERE state IN ('requested', 'accepted');
CREATE INDEX trades_lent_idx ON trades (due_on) WHERE state = 'completed' AND kind = 'loan';

-- A copy held by an accepted trade: one row per copy, so no copy is ever in two accepted trades.
CREATE TABLE copy_reservations (
    copy_id   uuid PRIMARY KEY REFERENCES copies (id),
    trade_id  uuid NOT NULL REFERENCES trades (id) ON DELETE CASCADE
);

CREATE TABLE trade_events (
    trade_id  uuid NOT NULL REFERENCES trades (id) ON DELETE CASCADE,
    seq       int NOT NULL,
    action    text NOT NULL,
    state     text NOT NULL,
    -- NULL: the service itself (expiry, or a decline because the copy was reserved).
    by_id     uuid REFERENCES users (id) ON DELETE SET NULL,
    at        timestamptz NOT NULL,
    PRIMARY KEY (trade_id, seq)
);

CREATE TABLE trade_counters (
    trade_id         uuid NOT NULL REFERENCES trades (id) ON DELETE CASCADE,
    seq              int NOT NULL,
    by_role          text NOT NULL CHECK (by_role IN ('requester', 'owner')),
    offered_copy_id  uuid REFERENCES copies (id) ON DELETE SET NULL,
    at               timestamptz NOT NULL,
    PRIMARY KEY (trade_id, seq)
);

CREATE TABLE trade_ratings (
    trade_id    uuid NOT NULL REFERENCES trades (id) ON DELETE CASCADE,
    rater_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    ratee_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    score       int NOT NULL CHECK (score BETWEEN 1 AND 5),
    comment     text CHECK (char_length(comment) <= 500),
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (trade_id, rater_id)
);
CREATE INDEX trade_ratings_ratee_idx ON trade_ratings (ratee_id);

-- Every change of a copy's owner; the first owner is the one who listed it.
CREATE TABLE copy_transfers (
    id             bigserial PRIMARY KEY,
    copy_id        uuid NOT NULL REFERENCES copies (id) ON DELETE CASCADE,
    at             timestamptz NOT NULL,
    from_owner_id  uuid REFERENCES users (id) ON DELETE SET NULL,
    to_owner_id    uuid REFERENCES users (id) ON DELETE SET NULL,
    kind           text NOT NULL CHECK (kind IN ('gift', 'swap')),
    trade_id       uuid REFERENCES trades (id) ON DELETE SET NULL
);
CREATE INDEX copy_transfers_copy_idx ON copy_transfers (copy_id, id);

-- The leased jobs every kind of background work runs on (besides mail, which has its outbox).
-- A recurring job is one row per (kind, key) that its handler moves forward after each run.
CREATE TABLE jobs (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    kind         text NOT NULL,
    key          text NOT NULL,
    payload      jsonb NOT NULL DEFAULT '{}',
    run_at       timestamptz NOT NULL,
    attempts     int NOT NULL DEFAULT 0,
    lease_owner  uuid,
    lease_until  timestamptz,
    last_error   text,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (kind, key)
);
CREATE INDEX jobs_due_idx ON jobs (run_at);

CREATE FUNCTION jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('jobs', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_notify AFTER INSERT ON jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_notify();
