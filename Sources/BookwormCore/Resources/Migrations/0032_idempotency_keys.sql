-- The first answer to a write sent with an Idempotency-Key (IdempotencyMiddleware), kept in the
-- write's own transaction. `scope` is `user:<id>` or `address:<client address>`; `user_id`
-- makes an erased user's answers go with them. `body` is NULL for an answer not kept for
-- replay (one that carried a session token). Housekeeping deletes rows past their lifetime.
CREATE TABLE idempotency_keys (
    scope text NOT NULL,
    key text NOT NULL,
    user_id uuid REFERENCES users (id) ON DELETE CASCADE,
    method text NOT NULL,
    target text NOT NULL,
    request_hash bytea NOT NULL,
    status integer NOT NULL,
    content_type text,
    location text,
    etag text,
    body bytea,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
CREATE INDEX idempotency_keys_user ON idempotency_keys (user_id) WHERE user_id IS NOT NULL;
