-- Works: the editions of one book (different ISBNs, translations aside) share a work key, so a
-- wish can match "any edition". The key is the title without its subtitle (after ':') and the
-- first author, accents and case folded and punctuation reduced to single spaces. A generated
-- column computes it for every new book and, as this migration adds it, for every existing one.

CREATE FUNCTION bookworm_work_key(title text, authors text[]) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
        SELECT btrim(regexp_replace(bookworm_fold(split_part(title, ':', 1)), '[^[:alnum:]]+', ' ', 'g'))
            || '|' || btrim(regexp_replace(bookworm_fold(coalesce(authors[1], '')), '[^[:alnum:]]+', ' ', 'g'))
    $$;

ALTER TABLE books ADD COLUMN work_key text GENERATED ALWAYS AS (bookworm_work_key(title, authors)) STORED;
CREATE INDEX books_work_idx ON books (work_key, id);
