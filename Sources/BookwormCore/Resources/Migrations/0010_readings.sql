-- Readings: a user's shelf, one reading per user and book (what I read, want to read, gave up).
CREATE TABLE readings (
    user_id         uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    book_id         uuid NOT NULL REFERENCES books (id),
    state           text NOT NULL CHECK (state IN ('interested', 'reading', 'finished', 'abandoned')),
    private         boolean NOT NULL DEFAULT false,
    closing_remark  text CHECK (char_length(closing_remark) <= 2000),
    started_on      date,
    finished_on     date CHECK (finished_on IS NULL OR started_on IS NULL OR finished_on >= started_on),
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (user_id, book_id)
);
-- My shelf and someone's public shelf: newest change first, keyset-paginated.
CREATE INDEX readings_shelf_idx ON readings (user_id, updated_at DESC, book_id DESC);
