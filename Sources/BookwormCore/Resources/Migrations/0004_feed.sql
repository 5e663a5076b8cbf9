-- Feed: "for trade" (offer) and "asking for" (wanted) notes. A post is placed on one of its
-- author's pins (their default when none is named), so the nearby feed can measure the
-- distance to that pin's public point, never to an exact home.

CREATE TABLE posts (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    author_id   uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind        text NOT NULL CHECK (kind IN ('offer', 'wanted')),
    body        text NOT NULL CHECK (char_length(body) BETWEEN 1 AND 2000),
    book_id     uuid REFERENCES books (id),
    -- A traded-away or deleted copy leaves the post standing, just no longer linked.
    copy_id     uuid REFERENCES copies (id) ON DELETE SET NULL,
    -- A deleted pin takes the post out of nearby feeds, not out of the global one.
    pin_id      uuid REFERENCES pins (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- Newest first by keyset, for each way the feed can be narrowed.
CREATE INDEX posts_recent_idx ON posts (created_at DESC, id DESC);
CREATE INDEX posts_kind_idx ON posts (kind, created_at DESC, id DESC);
CREATE INDEX posts_author_idx ON posts (author_id, created_at DESC, id DESC);
CREATE INDEX posts_book_idx ON posts (book_id, created_at DESC, id DESC) WHERE book_id IS NOT NULL;
CREATE INDEX posts_pin_idx ON posts (pin_id, created_at DESC, id DESC) WHERE pin_id IS NOT NULL;
CREATE INDEX posts_copy_idx ON posts (copy_id) WHERE copy_id IS NOT NULL;

-- The nearby searches (copies and posts) read only these columns of the pins in their box:
-- carrying them in the GiST index makes that an index-only scan instead of a heap visit per pin.
DROP INDEX pins_public_point_idx;
CREATE INDEX pins_public_point_idx ON pins USING gist (point(public_longitude, public_latitude))
    INCLUDE (id, owner_id, is_default, public_latitude, public_longitude);
