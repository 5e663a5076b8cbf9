-- Map clusters bounded by the map's area, not by how many pins a city has. Before, a dense box
-- counted every pin in it (29,480 pins in a London box at 5M copies: 12 ms). Public points sit
-- on the ~1 km privacy grid, so however many people pin a place, the box holds at most one
-- point per grid cell: `pin_points` keeps how many shown pins each public point has, and a
-- cluster query sums those, then takes away the pins of the few people the viewer is blocked
-- with.
--
-- "Shown" means the owner is not suspended, as `Visibility.ownerActive` says. Triggers keep the
-- counts: pins written, moved or deleted (statement triggers, so an import's thousands of pins
-- cost one upsert per point), and owners suspended or reinstated.
CREATE TABLE pin_points (
    public_latitude  float8 NOT NULL,
    public_longitude float8 NOT NULL,
    pins             int NOT NULL CHECK (pins >= 0),
    PRIMARY KEY (public_latitude, public_longitude)
);
-- Points whose count falls to zero stay (a place people pinned once is likely pinned again);
-- queries skip them.
CREATE INDEX pin_points_point_idx ON pin_points USING gist (point(public_longitude, public_latitude)) INCLUDE (pins);

-- The statement that adds the rows of `changes` (public_latitude, public_longitude, n) to their
-- points; each trigger runs it itself, because only the trigger's own function sees the
-- statement's transition tables. Gains go
-- through an upsert; losses through an UPDATE, since an upsert checks `pins >= 0` on the row it
-- proposes before it finds the existing one. A loss always finds its row, and if it ever took a
-- count below zero the CHECK would stop the statement rather than let the counts drift.
CREATE FUNCTION pin_points_shift(changes text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format($q$
        WITH delta AS (
            SELECT public_latitude, public_longitude, sum(n)::int AS n FROM (%s) c
            GROUP BY 1, 2 HAVING sum(n) <> 0
        ), losses AS (
            UPDATE pin_points pp SET pins = pp.pins + d.n FROM delta d
            WHERE d.n < 0 AND pp.public_latitude = d.public_latitude AND pp.public_longitude = d.public_longitude
        )
        INSERT INTO pin_points AS pp (public_latitude, public_longitude, pins)
        SELECT public_latitude, public_longitude, n FROM delta WHERE n > 0
        ORDER BY 1, 2
        ON CONFLICT (public_latitude, public_longitude) DO UPDATE SET pins = pp.pins + excluded.pins
        $q$, changes)
$$;

-- A statement's pins, as gains and losses of their points. The owners are locked first, in id
-- order: a suspension (an UPDATE of the user row) then waits for this transaction, or this one
-- waits for the suspension and reads the owner as suspended, so a pin is never counted for an
-- owner whose suspension has already taken their pins away.
CREATE FUNCTION pin_points_follow_pins() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changes text := CASE TG_OP
        WHEN 'INSERT' THEN 'SELECT owner_id, public_latitude, public_longitude, 1 AS n FROM new_pins'
        WHEN 'DELETE' THEN 'SELECT owner_id, public_latitude, public_longitude, -1 AS n FROM old_pins'
        ELSE 'SELECT owner_id, public_latitude, public_longitude, 1 AS n FROM new_pins
              UNION ALL SELECT owner_id, public_latitude, public_longitude, -1 FROM old_pins' END;
BEGIN
    EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM users WHERE id IN (SELECT owner_id FROM (%s) c)
                    ORDER BY id FOR SHARE) locked', changes);
    EXECUTE pin_points_shift(format(
        'SELECT * FROM (%s) c WHERE NOT EXISTS (SELECT 1 FROM users su WHERE su.id = c.owner_id AND su.suspended_at IS NOT NULL)',
        changes));
    RETURN NULL;
END $$;
CREATE TRIGGER pins_points_insert AFTER INSERT ON pins REFERENCING NEW TABLE AS new_pins
    FOR EACH STATEMENT EXECUTE FUNCTION pin_points_follow_pins();
CREATE TRIGGER pins_points_delete AFTER DELETE ON pins REFERENCING OLD TABLE AS old_pins
    FOR EACH STATEMENT EXECUTE FUNCTION pin_points_follow_pins();
CREATE TRIGGER pins_points_update AFTER UPDATE ON pins REFERENCING OLD TABLE AS old_pins NEW TABLE AS new_pins
    FOR EACH STATEMENT EXECUTE FUNCTION pin_points_follow_pins();

-- A suspension takes the owner's pins off their points and a reinstatement puts them back. A
-- suspended owner's pins are put back just before the owner is deleted, because the cascade
-- that deletes the pins can no longer see that the owner was suspended and takes them off.
CREATE FUNCTION pin_points_follow_owner() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE pin_points_shift(format(
        'SELECT public_latitude, public_longitude, %s AS n FROM pins WHERE owner_id = %L',
        CASE WHEN TG_OP = 'UPDATE' AND NEW.suspended_at IS NOT NULL THEN -1 ELSE 1 END, OLD.id));
    RETURN OLD;
END $$;
CREATE TRIGGER users_pin_points_suspension AFTER UPDATE OF suspended_at ON users
    FOR EACH ROW WHEN ((OLD.suspended_at IS NULL) <> (NEW.suspended_at IS NULL))
    EXECUTE FUNCTION pin_points_follow_owner();
CREATE TRIGGER users_pin_points_erasure BEFORE DELETE ON users
    FOR EACH ROW WHEN (OLD.suspended_at IS NOT NULL)
    EXECUTE FUNCTION pin_points_follow_owner();

INSERT INTO pin_points (public_latitude, public_longitude, pins)
SELECT public_latitude, public_longitude, count(*)
FROM pins p
WHERE NOT EXISTS (SELECT 1 FROM users su WHERE su.id = p.owner_id AND su.suspended_at IS NOT NULL)
GROUP BY 1, 2;
