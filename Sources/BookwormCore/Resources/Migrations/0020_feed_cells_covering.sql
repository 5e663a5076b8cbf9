-- The nearby feed reads each covering cell newest first until it has a page inside the radius.
-- A cell the circle only clips (a dense city cell with few of its posts inside) is read to its
-- end: with every column the read tests carried in the index (the public point for the
-- distance, the author for blocks and suspension, the hidden flag, the kind), that costs index
-- entries rather than post rows. The page's posts are joined by id.
DROP INDEX posts_cell_idx;
DROP INDEX posts_region_idx;
CREATE INDEX posts_cell_idx ON posts (cell, created_at DESC, id DESC)
    INCLUDE (public_latitude, public_longitude, author_id, hidden_at, kind) WHERE cell IS NOT NULL;
CREATE INDEX posts_region_idx ON posts (region, created_at DESC, id DESC)
    INCLUDE (public_latitude, public_longitude, author_id, hidden_at, kind) WHERE region IS NOT NULL;
