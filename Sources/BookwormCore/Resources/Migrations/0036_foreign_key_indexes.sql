-- Every foreign key that a delete follows has an index on its column. Without one, PostgreSQL
-- reads the whole referencing table for each row deleted: removing a user's copies scanned
-- contact_requests and trade_counters once per copy (a benchmark's 100,000 copies had not gone
-- after nine minutes), erasing an account scanned copy_transfers, trade_events and
-- trade_ratings, and each purged mail or deleted post scanned contact_requests. Books are never
-- deleted, so the book_id keys need none.
CREATE INDEX contact_requests_copy_idx ON contact_requests (copy_id) WHERE copy_id IS NOT NULL;
CREATE INDEX contact_requests_recipient_idx ON contact_requests (recipient_id);
CREATE INDEX contact_requests_outbox_idx ON contact_requests (outbox_id) WHERE outbox_id IS NOT NULL;
CREATE INDEX contact_requests_post_idx ON contact_requests (post_id) WHERE post_id IS NOT NULL;
CREATE INDEX trade_counters_offered_copy_idx ON trade_counters (offered_copy_id) WHERE offered_copy_id IS NOT NULL;
CREATE INDEX trade_events_by_idx ON trade_events (by_id) WHERE by_id IS NOT NULL;
CREATE INDEX trade_ratings_rater_idx ON trade_ratings (rater_id);
CREATE INDEX copy_reservations_trade_idx ON copy_reservations (trade_id) WHERE trade_id IS NOT NULL;
CREATE INDEX copy_transfers_trade_idx ON copy_transfers (trade_id) WHERE trade_id IS NOT NULL;
CREATE INDEX copy_transfers_from_owner_idx ON copy_transfers (from_owner_id) WHERE from_owner_id IS NOT NULL;
CREATE INDEX copy_transfers_to_owner_idx ON copy_transfers (to_owner_id) WHERE to_owner_id IS NOT NULL;
