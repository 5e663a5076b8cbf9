-- Nearby pages read the candidate copies of each pin by these indexes alone (an index-only
-- scan): the predicate holds the visibility rule's hidden flag and the row carries the owner
-- for the suspension check, so a cell centre with hundreds of homes costs index entries, not
-- copy rows. They replace the indexes of 0003, which every reader of them filtered further.
CREATE INDEX copies_pin_shown_idx ON copies (pin_id) INCLUDE (id, owner_id)
    WHERE status = 'available' AND hidden_at IS NULL;
CREATE INDEX copies_owner_unpinned_shown_idx ON copies (owner_id) INCLUDE (id)
    WHERE status = 'available' AND pin_id IS NULL AND hidden_at IS NULL;
DROP INDEX copies_pin_available_idx;
DROP INDEX copies_owner_unpinned_idx;
