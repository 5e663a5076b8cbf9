import Foundation

/// SQL for `BookwormBench shelf`: seeding wishes, the matcher and the popular book's wishers,
/// and the plain two-sided join a first draft of the matches would be. Triggers are off while
/// seeding (`session_replication_role = replica`): seeded copies must not start fan-outs.
enum ShelfBenchmarkSQL {
    /// Wishes until there are `count`: about five a user, books drawn with a cubic skew so the
    /// first books by id are wished very often, radius 10–50 km, from the default pin.
    static func seedWishes(count: Int) -> String {
        """
        SET session_replication_role = replica;
        CREATE TABLE IF NOT EXISTS bench_book_rank AS SELECT id, work_key, row_number() OVER (ORDER BY id) AS r FROM books;
        CREATE UNIQUE INDEX IF NOT EXISTS bench_book_rank_r ON bench_book_rank (r);
        INSERT INTO wishes (user_id, book_id, work_key, radius_km, created_at)
        SELECT x.user_id, b.id, b.work_key, x.radius, now()
        FROM (SELECT u.id AS user_id, 1 + floor((SELECT count(*) FROM bench_book_rank) * power(random(), 3))::int AS r,
                     10 + random() * 40 AS radius
              FROM users u CROSS JOIN generate_series(1, 6) g
              ORDER BY random()
              LIMIT greatest(0, \(count) - (SELECT count(*) FROM wishes)) * 11 / 10) x
        JOIN bench_book_rank b ON b.r = x.r
        ON CONFLICT (user_id, book_id) DO NOTHING;
        """
    }

    /// The matcher, made afresh each run: a default (meetup) pin at `latitude`/`longitude`, 50
    /// available copies of the books most wished for within 25 km, and 50 wishes for the books
    /// with the most copies on offer within 25 km (an active member of a busy city).
    static func seedMatcher(username: String, latitude: Double, longitude: Double) -> String {
        let near = "bookworm_distance_km(\(latitude), \(longitude), p.public_latitude, p.public_longitude) <= 25"
        return """
        SET session_replication_role = replica;
        DELETE FROM copies WHERE owner_id = (SELECT id FROM users WHERE username = '\(username)');
        DELETE FROM wishes WHERE user_id = (SELECT id FROM users WHERE username = '\(username)');
        INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude, is_default)
        SELECT u.id, 'Cafe', 'meetup', \(latitude), \(longitude), \(latitude), \(longitude), true FROM users u
        WHERE u.username = '\(username)' AND NOT EXISTS (SELECT 1 FROM pins p WHERE p.owner_id = u.id);
        INSERT INTO copies (owner_id, book_id, condition)
        SELECT (SELECT id FROM users WHERE username = '\(username)'), book_id, 'good' FROM (
            SELECT w.book_id FROM wishes w JOIN pins p ON p.owner_id = w.user_id AND p.is_default
            WHERE \(near) GROUP BY w.book_id ORDER BY count(*) DESC, w.book_id LIMIT 50) top;
        INSERT INTO wishes (user_id, book_id, work_key, radius_km, created_at)
        SELECT (SELECT id FROM users WHERE username = '\(username)'), b.id, b.work_key, 25, now() FROM (
            SELECT c.book_id FROM copies c
            JOIN pins p ON p.id = coalesce(c.pin_id, (SELECT d.id FROM pins d WHERE d.owner_id = c.owner_id AND d.is_default))
            WHERE c.status = 'available' AND \(near)
              AND c.book_id NOT IN (SELECT book_id FROM copies WHERE owner_id = (SELECT id FROM users WHERE username = '\(username)'))
            GROUP BY c.book_id ORDER BY count(*) DESC, c.book_id LIMIT 50) top JOIN books b ON b.id = top.book_id;
        ANALYZE wishes;
        """
    }

    /// The popular book: one of its own, wished (within 500 km) by the `count` users whose
    /// default pins are nearest `latitude`/`longitude`; earlier runs' copies of it and their
    /// alerts go first.
    static func seedPopular(title: String, count: Int, latitude: Double, longitude: Double) -> String {
        """
        SET session_replication_role = replica;
        INSERT INTO books (title, authors) SELECT '\(title)', ARRAY['Bench Author']
        WHERE NOT EXISTS (SELECT 1 FROM books WHERE title = '\(title)');
        DELETE FROM copies WHERE book_id = (SELECT id FROM books WHERE title = '\(title)');
        DELETE FROM jobs WHERE kind IN ('alerts.copy', 'alerts.wish', 'alerts.digest');
        INSERT INTO wishes (user_id, book_id, work_key, radius_km, created_at)
        SELECT p.owner_id, b.id, b.work_key, 500, now()
        FROM (SELECT owner_id FROM pins WHERE is_default
              ORDER BY public_xyz <-> cube(ARRAY[cos(radians(\(latitude))) * cos(radians(\(longitude))),
                                                cos(radians(\(latitude))) * sin(radians(\(longitude))), sin(radians(\(latitude)))])
              LIMIT \(count)) p
        CROSS JOIN (SELECT id, work_key FROM books WHERE title = '\(title)') b
        ON CONFLICT (user_id, book_id) DO NOTHING;
        """
    }

    /// What a first draft writes: my wishes joined to everyone's copies near me, joined to their
    /// owners' wishes, joined to my copies, grouped by owner. Same rules and answers as the
    /// project's query. $1 me, $2/$3 my public point, $4 radius, $5 limit.
    static let plainJoin = """
        SELECT tc.owner_id, min(bookworm_distance_km($2, $3, tp.public_latitude, tp.public_longitude)) AS distance,
               array_agg(DISTINCT tc.id) AS they_have, array_agg(DISTINCT mc.id) AS i_have
        FROM wishes mw
        JOIN books tb ON tb.work_key = mw.work_key AND (mw.any_edition OR tb.id = mw.book_id)
        JOIN copies tc ON tc.book_id = tb.id AND tc.status = 'available' AND tc.owner_id <> $1
        JOIN pins tp ON tp.id = coalesce(tc.pin_id, (SELECT d.id FROM pins d WHERE d.owner_id = tc.owner_id AND d.is_default))
        JOIN wishes tw ON tw.user_id = tc.owner_id
        JOIN books mb ON mb.work_key = tw.work_key AND (tw.any_edition OR mb.id = tw.book_id)
        JOIN copies mc ON mc.book_id = mb.id AND mc.owner_id = $1 AND mc.status = 'available'
        WHERE mw.user_id = $1
          AND bookworm_distance_km($2, $3, tp.public_latitude, tp.public_longitude) <= $4
          AND (mw.min_condition IS NULL OR bookworm_condition_rank(tc.condition) >= bookworm_condition_rank(mw.min_condition))
          AND (tw.min_condition IS NULL OR bookworm_condition_rank(mc.condition) >= bookworm_condition_rank(tw.min_condition))
          AND NOT EXISTS (SELECT 1 FROM blocks bl WHERE (bl.blocker_id = $1 AND bl.blocked_id = tc.owner_id)
                                                    OR (bl.blocker_id = tc.owner_id AND bl.blocked_id = $1))
        GROUP BY tc.owner_id
        ORDER BY least(count(DISTINCT tc.id), count(DISTINCT mc.id)) DESC, count(DISTINCT tc.id) + count(DISTINCT mc.id) DESC,
                 distance, tc.owner_id
        LIMIT $5
        """
}
