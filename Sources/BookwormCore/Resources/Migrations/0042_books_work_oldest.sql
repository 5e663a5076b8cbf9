-- An import gives each record its work's oldest book (ImportBatch.oldestBookOfWork). With the
-- work's books in the index by age, that book is the first entry under the key, whatever the
-- planner guesses about how many books a work has. On (work_key, id) every book of the work was
-- read and sorted, and a planner that guessed many books a work (63 on the bench catalogue)
-- could instead walk books_recent_idx from the oldest book, through the whole catalogue for a
-- rare work. Every other reader of work_key only needs equality, which the new index serves.
--
-- Both locks are held until the migration commits: the build's holds off every write to books
-- (built concurrently, the index took 1.6 s over 886,000 books on the bench machine), and the
-- drop's, once it has waited for the statements reading books, holds off their reads too; new
-- books, imports and searches wait, and may meet their statement timeout. On a large catalogue,
-- build the index by hand first, outside a transaction (CREATE INDEX CONCURRENTLY
-- books_work_oldest_idx ON books (work_key, created_at, id)), and drop the old one the same way
-- (DROP INDEX CONCURRENTLY books_work_idx): the migration then finds both done. An index of that
-- name left invalid by an interrupted build is dropped and built again here, since it serves no
-- query.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index
               WHERE indexrelid = to_regclass('books_work_oldest_idx') AND NOT indisvalid) THEN
        DROP INDEX books_work_oldest_idx;
    END IF;
END $$;
CREATE INDEX IF NOT EXISTS books_work_oldest_idx ON books (work_key, created_at, id);
DROP INDEX IF EXISTS books_work_idx;
