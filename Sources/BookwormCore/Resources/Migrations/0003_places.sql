-- Places: where people trade. A pin keeps its owner's exact point and the public point
-- everyone else sees (the ~1 km cell centre for a home, the exact point for a meetup place).

-- Great-circle distance on the mean Earth radius; the one formula every query uses. Not
-- STRICT on purpose: a non-strict one-expression SQL function is inlined into the query
-- instead of being called per row (a function call per pin cost more than the index scan).
CREATE FUNCTION bookworm_distance_km(lat1 float8, lon1 float8, lat2 float8, lon2 float8) RETURNS float8
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
        SELECT 2 * 6371.0088 * asin(least(1, sqrt(
            sin(radians(lat2 - lat1) / 2) ^ 2
            + cos(radians(lat1)) * cos(radians(lat2)) * sin(radians(lon2 - lon1) / 2) ^ 2)))
    $$;

CREATE TABLE pins (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id          uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    label             text NOT NULL CHECK (char_length(label) BETWEEN 1 AND 80),
    kind              text NOT NULL CHECK (kind IN ('home', 'meetup')),
    latitude          float8 NOT NULL CHECK (latitude BETWEEN -90 AND 90),
    longitude         float8 NOT NULL CHECK (longitude BETWEEN -180 AND 180),
    public_latitude   float8 NOT NULL CHECK (public_latitude BETWEEN -90 AND 90),
    public_longitude  float8 NOT NULL CHECK (public_longitude BETWEEN -180 AND 180),
    is_default        boolean NOT NULL DEFAULT false,
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at        timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- At most one default per user (the code keeps it exactly one while the user has pins).
CREATE UNIQUE INDEX pins_one_default_idx ON pins (owner_id) WHERE is_default;
CREATE INDEX pins_owner_idx ON pins (owner_id, created_at, id);
-- Prunes nearby searches to a latitude/longitude box around the query; the exact distance decides.
CREATE INDEX pins_public_point_idx ON pins USING gist (point(public_longitude, public_latitude));

ALTER TABLE copies ADD CONSTRAINT copies_pin_id_fkey FOREIGN KEY (pin_id) REFERENCES pins (id) ON DELETE SET NULL;
-- The two ways a copy is somewhere: on its own pin, or (unplaced) on its owner's default pin.
-- Both carry the copy id so a search without words can answer from the index alone.
CREATE INDEX copies_pin_available_idx ON copies (pin_id) INCLUDE (id) WHERE status = 'available';
CREATE INDEX copies_owner_unpinned_idx ON copies (owner_id) INCLUDE (id) WHERE status = 'available' AND pin_id IS NULL;
