-- Catalog: editions (books), the copies people own, and their photos. Books are never
-- edited after creation (find-or-create), which is what lets copies keep a copy of their search text.

CREATE EXTENSION IF NOT EXISTS unaccent;

-- Case- and accent-folding for search. unaccent() itself is only STABLE (it reads a
-- dictionary by name); naming the dictionary explicitly makes the wrapper safe to index.
CREATE FUNCTION bookworm_fold(text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    AS $$ SELECT lower(public.unaccent('public.unaccent'::regdictionary, $1)) $$;

-- A search box's words as a tsquery: every word must match, the last one as a prefix (so it
-- works while the user is typing). Words are folded like the indexed text.
CREATE FUNCTION bookworm_search_query(words text[]) RETURNS tsquery
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    AS $$
        SELECT to_tsquery('simple', string_agg(
            quote_literal(bookworm_fold(w)) || CASE WHEN i = cardinality(words) THEN ':*' ELSE '' END,
            ' & ' ORDER BY i))
        FROM unnest(words) WITH ORDINALITY AS t(w, i)
    $$;

-- What a book is found by. array_to_string is only STABLE, so the generated column needs this
-- IMMUTABLE wrapper (safe: it depends on nothing but its arguments).
CREATE FUNCTION bookworm_book_document(title text, authors text[]) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT to_tsvector('simple', bookworm_fold(title || ' ' || array_to_string(authors, ' '))) $$;

CREATE TABLE books (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- NULL for books without an ISBN (older books): those are matched by nothing.
    isbn13          text UNIQUE CHECK (isbn13 ~ '^97[89][0-9]{10}$'),
    title           text NOT NULL CHECK (char_length(title) BETWEEN 1 AND 300),
    authors         text[] NOT NULL CHECK (cardinality(authors) BETWEEN 1 AND 20),
    publisher       text,
    published_year  integer,
    language        text,
    search          tsvector GENERATED ALWAYS AS (bookworm_book_document(title, authors)) STORED,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX books_search_idx ON books USING gin (search);
CREATE INDEX books_recent_idx ON books (created_at DESC, id DESC);

-- Stored once per distinct content: the id is the SHA-256 of the bytes.
CREATE TABLE photos (
    id            text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{64}$'),
    content_type  text NOT NULL CHECK (content_type IN ('image/jpeg', 'image/png', 'image/webp')),
    bytes         bytea NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE copies (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    book_id     uuid NOT NULL REFERENCES books (id),
    condition   text NOT NULL CHECK (condition IN ('new', 'like_new', 'good', 'fair', 'poor')),
    status      text NOT NULL DEFAULT 'available'
                CHECK (status IN ('available', 'reserved', 'traded', 'withdrawn')),
    notes       text,
    -- Validated against the owner's pins once pins exist.
    pin_id      uuid,
    photo_id    text REFERENCES photos (id),
    -- The book's search document, copied here by trigger, so that the library search is one
    -- index on one table and the planner can weigh "few matches" against "newest first".
    search      tsvector,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE FUNCTION copies_take_book_search() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
    BEGIN
        SELECT b.search INTO NEW.search FROM books b WHERE b.id = NEW.book_id;
        RETURN NEW;
    END
    $$;
CREATE TRIGGER copies_book_search BEFORE INSERT OR UPDATE OF book_id ON copies
    FOR EACH ROW EXECUTE FUNCTION copies_take_book_search();
-- The library: available copies, newest first, keyset-paginated.
CREATE INDEX copies_library_idx ON copies (created_at DESC, id DESC) WHERE status = 'available';
CREATE INDEX copies_owner_idx ON copies (owner_id, created_at DESC, id DESC);
CREATE INDEX copies_book_available_idx ON copies (book_id, created_at DESC, id DESC) WHERE status = 'available';
CREATE INDEX copies_search_idx ON copies USING gin (search) WHERE status = 'available';
CREATE INDEX copies_photo_idx ON copies (photo_id) WHERE photo_id IS NOT NULL;
