-- Foreign keys whose only index is partial on another condition, which the delete's lookup cannot
-- use. A deleted copy sets trades.copy_id and offered_copy_id to null, and their indexes hold open
-- trades only (0008): every copy deleted read the whole trades table (98,506 scans of 10 billion
-- rows while a benchmark's storm users were deleted). A deleted pin read every copy, and a
-- deleted user every session and report.
CREATE INDEX trades_copy_idx ON trades (copy_id) WHERE copy_id IS NOT NULL;
CREATE INDEX trades_offered_copy_idx ON trades (offered_copy_id) WHERE offered_copy_id IS NOT NULL;
CREATE INDEX copies_pin_idx ON copies (pin_id) WHERE pin_id IS NOT NULL;
CREATE INDEX sessions_user_idx ON sessions (user_id);
CREATE INDEX reports_reporter_idx ON reports (reporter_id);
