-- A photo is stored as what the server made of the upload, never the upload itself: three
-- sizes, each as JPEG and WebP, decoded and written anew without metadata (photo_files), with
-- the full size's dimensions and a blurhash. A row from before keeps its upload in `bytes`
-- until the photos job has made its sizes and moved its copies to the new row.
ALTER TABLE photos
    ALTER COLUMN content_type DROP NOT NULL,
    ALTER COLUMN bytes DROP NOT NULL,
    ADD COLUMN width int CHECK (width > 0),
    ADD COLUMN height int CHECK (height > 0),
    ADD COLUMN blurhash text,
    ADD CONSTRAINT photos_made_or_uploaded
        CHECK ((bytes IS NULL) = (width IS NOT NULL AND height IS NOT NULL AND blurhash IS NOT NULL));

CREATE TABLE photo_files (
    photo_id  text NOT NULL REFERENCES photos (id) ON DELETE CASCADE,
    size      text NOT NULL CHECK (size IN ('thumb', 'card', 'full')),
    format    text NOT NULL CHECK (format IN ('jpeg', 'webp')),
    bytes     bytea NOT NULL,
    PRIMARY KEY (photo_id, size, format)
);

CREATE INDEX photos_uploaded_idx ON photos (created_at) WHERE bytes IS NOT NULL;
