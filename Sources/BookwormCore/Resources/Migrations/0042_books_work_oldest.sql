-- An import gives each record its work's oldest book (ImportBatch.oldestBookOfWork). With the
-- work's books in the index by age, that book is the first entry under the key, whatever the
-- planner guesses about how many books a work has. On (work_key, id) every book of the work was
-- read and sorted, and a planner that guessed many books a work (63 on the bench catalogue)
-- could instead walk books_recent_idx from the oldest book, through the whole catalogue for a
-- rare work. Every other reader of work_key only needs equality, which the new index serves.
--
-- In the migration's transaction the build (1.6 s for 886,000 books on the bench machine) holds
-- off every write to books (new books and imports wait, and may meet their statement timeout),
-- and the drop waits for the readers of books before it. On a large catalogue, build the index
-- by hand first, outside a transaction (CREATE INDEX CONCURRENTLY books_work_oldest_idx ON
-- books (work_key, created_at, id); one that was interrupted is left invalid: drop it and build
-- again); the migration then only drops the old one.
CREATE INDEX IF NOT EXISTS books_work_oldest_idx ON books (work_key, created_at, id);
DROP INDEX books_work_idx;
