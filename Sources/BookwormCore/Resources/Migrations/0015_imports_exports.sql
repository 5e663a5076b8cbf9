-- Imports (a Goodreads CSV, a LibraryThing JSON, a Bookworm export) and exports (a zip of
-- everything a user owns), both built by jobs on the leased `jobs` table.

CREATE TABLE imports (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id           uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    format            text NOT NULL CHECK (format IN ('goodreads', 'librarything', 'bookworm')),
    status            text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'done', 'failed')),
    -- The uploaded file, kept until the import is done (a crashed run resumes from `done`).
    payload           bytea,
    total             int NOT NULL,
    done              int NOT NULL DEFAULT 0,
    created_books     int NOT NULL DEFAULT 0,
    created_copies    int NOT NULL DEFAULT 0,
    created_readings  int NOT NULL DEFAULT 0,
    created_wishes    int NOT NULL DEFAULT 0,
    skipped           int NOT NULL DEFAULT 0,
    errors            jsonb NOT NULL DEFAULT '[]',
    created_at        timestamptz NOT NULL,
    finished_at       timestamptz
);
CREATE INDEX imports_user_idx ON imports (user_id, created_at DESC);

-- What an imported copy or pin came from (a Goodreads book id and copy number, a LibraryThing
-- book, an exported object): the same file imported twice creates nothing twice.
ALTER TABLE copies ADD COLUMN import_key text;
CREATE UNIQUE INDEX copies_import_key_idx ON copies (owner_id, import_key) WHERE import_key IS NOT NULL;
ALTER TABLE pins ADD COLUMN import_key text;
CREATE UNIQUE INDEX pins_import_key_idx ON pins (owner_id, import_key) WHERE import_key IS NOT NULL;

CREATE TABLE exports (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    status       text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'done', 'failed')),
    archive      bytea,
    size         bigint,
    created_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    -- The archive is downloadable until then; housekeeping drops it after.
    expires_at   timestamptz
);
CREATE INDEX exports_user_idx ON exports (user_id, created_at DESC);
CREATE INDEX exports_expiry_idx ON exports (expires_at) WHERE archive IS NOT NULL;
