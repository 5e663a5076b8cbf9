-- The client address a report came from: reporters who share one count once toward hiding a
-- copy or post. Reports filed before this have none and count one per reporter. The row goes
-- with its reporter's account (ON DELETE CASCADE), so erasure takes the address too.
ALTER TABLE reports ADD COLUMN client_address text CHECK (char_length(client_address) <= 64);
