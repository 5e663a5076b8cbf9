-- The nearby feed for a radius that no 0.1 degree cell lies mostly inside (a few kilometres or
-- less). Such a page reads the cells the circle clips, each until it has a page inside the
-- radius or to its end; where a cell is dense and the circle holds few of its posts, that was
-- the whole cell (at 5,000,000 posts, central London's cell holds 139,000 posts at 77 public
-- points: 20 ms for an empty page at 0.3 km). Public points are few and shared (homes publish
-- their privacy cell's centre), so such a page reads the points instead: the distinct public
-- points holding posts in the clipped cells, kept here, those inside the radius, and each of
-- their posts newest first by the index below, merged. Its cost follows the points inside the
-- circle, not the posts outside it.

-- Every point that has held a post, by cell. Rows are only added (a trigger that removed a
-- point with its last post could race a post being written there, and lose it from the feed);
-- a point left without posts costs one empty index read when a page's circle holds it.
CREATE TABLE post_points (
    cell int8 NOT NULL,
    latitude float8 NOT NULL,
    longitude float8 NOT NULL,
    PRIMARY KEY (cell, latitude, longitude)
);

CREATE FUNCTION posts_note_point() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.cell IS NOT NULL THEN
        INSERT INTO post_points (cell, latitude, longitude) VALUES (NEW.cell, NEW.public_latitude, NEW.public_longitude)
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER posts_point AFTER INSERT OR UPDATE OF cell, public_latitude, public_longitude ON posts
    FOR EACH ROW EXECUTE FUNCTION posts_note_point();

INSERT INTO post_points (cell, latitude, longitude)
SELECT DISTINCT cell, public_latitude, public_longitude FROM posts WHERE cell IS NOT NULL;

CREATE INDEX posts_point_idx ON posts (public_latitude, public_longitude, created_at DESC, id DESC)
    INCLUDE (author_id, hidden_at, kind) WHERE cell IS NOT NULL;
