-- Nearest-first search without measuring every pin in the radius: each pin's public point as
-- a point on the unit sphere, in a GiST index. Straight-line (chord) distance between two such
-- points grows exactly with great-circle distance, so the index's nearest-neighbour scan
-- (ORDER BY <->) walks pins in the order the API promises, stopping as soon as a page is full,
-- across the antimeridian and over the poles alike. The haversine still decides inclusion and
-- is what clients see.
CREATE EXTENSION IF NOT EXISTS cube;

ALTER TABLE pins ADD COLUMN public_xyz cube GENERATED ALWAYS AS (cube(ARRAY[
    cos(radians(public_latitude)) * cos(radians(public_longitude)),
    cos(radians(public_latitude)) * sin(radians(public_longitude)),
    sin(radians(public_latitude))])) STORED;
CREATE INDEX pins_public_xyz_idx ON pins USING gist (public_xyz);
