-- The nearby feed, bounded by its page rather than by the city. Before, a page read every pin in
-- the radius and then their posts: in a dense city that is tens of thousands of rows for 20.
-- Now each post carries its pin's public point and the grid cells that point falls in, and a
-- (cell, created_at DESC, id DESC) index yields one cell's posts newest first. A page reads the
-- covering cells of its radius, each only until it has a page of posts inside the radius, and
-- merges them. Two grids: 0.1 degree cells for the usual radii, 1 degree regions for wide ones
-- (the query falls back to the pins when even the regions would be too many, as at a pole).

-- The cell a public point falls in on a grid of `step` degrees. The API's code computes the same
-- numbers with the same floating-point operations, so the two agree to the last bit.
CREATE FUNCTION bookworm_grid_cell(lat float8, lon float8, step float8) RETURNS int8
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT floor((lat + 90) / step)::int8 * 100000 + floor((lon + 180) / step)::int8 $$;

ALTER TABLE posts
    ADD COLUMN public_latitude float8,
    ADD COLUMN public_longitude float8,
    ADD COLUMN cell int8,
    ADD COLUMN region int8;

-- A post's place follows its pin: set when the post is written or moved to another pin, cleared
-- when the pin is deleted (the foreign key's SET NULL is an UPDATE of pin_id, so this runs).
CREATE FUNCTION posts_place_from_pin() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT p.public_latitude, p.public_longitude INTO NEW.public_latitude, NEW.public_longitude
    FROM pins p WHERE p.id = NEW.pin_id;
    IF NEW.pin_id IS NULL OR NOT FOUND THEN
        NEW.public_latitude := NULL;
        NEW.public_longitude := NULL;
    END IF;
    NEW.cell := bookworm_grid_cell(NEW.public_latitude, NEW.public_longitude, 0.1);
    NEW.region := bookworm_grid_cell(NEW.public_latitude, NEW.public_longitude, 1.0);
    RETURN NEW;
END $$;
CREATE TRIGGER posts_place BEFORE INSERT OR UPDATE OF pin_id ON posts
    FOR EACH ROW EXECUTE FUNCTION posts_place_from_pin();

-- A pin that moves takes its posts along.
CREATE FUNCTION pins_move_posts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE posts SET public_latitude = NEW.public_latitude, public_longitude = NEW.public_longitude,
                     cell = bookworm_grid_cell(NEW.public_latitude, NEW.public_longitude, 0.1),
                     region = bookworm_grid_cell(NEW.public_latitude, NEW.public_longitude, 1.0)
    WHERE pin_id = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER pins_move_posts AFTER UPDATE OF public_latitude, public_longitude ON pins
    FOR EACH ROW WHEN (OLD.public_latitude IS DISTINCT FROM NEW.public_latitude
                       OR OLD.public_longitude IS DISTINCT FROM NEW.public_longitude)
    EXECUTE FUNCTION pins_move_posts();

-- Filling in what exists changes nothing a client keeps, so it is not recorded for sync.
ALTER TABLE posts DISABLE TRIGGER posts_sync;
UPDATE posts po
SET public_latitude = p.public_latitude, public_longitude = p.public_longitude,
    cell = bookworm_grid_cell(p.public_latitude, p.public_longitude, 0.1),
    region = bookworm_grid_cell(p.public_latitude, p.public_longitude, 1.0)
FROM pins p WHERE p.id = po.pin_id;
ALTER TABLE posts ENABLE TRIGGER posts_sync;

CREATE INDEX posts_cell_idx ON posts (cell, created_at DESC, id DESC) WHERE cell IS NOT NULL;
CREATE INDEX posts_region_idx ON posts (region, created_at DESC, id DESC) WHERE region IS NOT NULL;
