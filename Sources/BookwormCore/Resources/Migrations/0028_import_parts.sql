-- An upload is stored as it arrives, a part of about 1 MiB at a time, so that no process holds a
-- whole file while it is sent: ten uploads of 10 MiB at once cost the server a few MiB each.
-- An import is `uploading` until its last part is in; only then is it queued for the worker.
CREATE TABLE import_parts (
    import_id  uuid NOT NULL REFERENCES imports (id) ON DELETE CASCADE,
    seq        int NOT NULL,
    bytes      bytea NOT NULL,
    PRIMARY KEY (import_id, seq)
);

ALTER TABLE imports DROP CONSTRAINT imports_status_check;
ALTER TABLE imports ADD CONSTRAINT imports_status_check
    CHECK (status IN ('uploading', 'queued', 'running', 'done', 'failed'));
