-- Map clusters bounded by the map's area, not by how many pins a city has. Before, a dense box
-- counted every pin in it (29,480 pins in a London box at 5M copies: 12 ms). Now `pin_spots`
-- keeps, per square of 0.01 degree (about 1 km), how many shown pins it holds and the sums of
-- their public points; a cluster query sums the spots whose mean point is in the box, then takes
-- away the pins of the few people the viewer is blocked with. A box holds at most one spot per
-- square, however many people pinned it.
--
-- "Shown" means the owner is not suspended, as `Visibility.ownerActive` says. Triggers keep the
-- spots: pins written, moved or deleted (statement triggers, so an import's thousands of pins
-- cost one upsert per spot), and owners suspended or reinstated.
CREATE FUNCTION bookworm_map_spot(lat float8, lon float8) RETURNS int8
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT bookworm_grid_cell(lat, lon, 0.01) $$;

CREATE TABLE pin_spots (
    spot          int8 PRIMARY KEY,
    pins          int NOT NULL CHECK (pins >= 0),
    latitude_sum  float8 NOT NULL,
    longitude_sum float8 NOT NULL
);
-- Spots whose count falls to zero stay (a place pinned once is likely pinned again); the index
-- and the queries skip them.
CREATE INDEX pin_spots_mean_idx ON pin_spots USING gist (point(longitude_sum / pins, latitude_sum / pins))
    INCLUDE (pins, latitude_sum, longitude_sum) WHERE pins > 0;

-- The statement that adds the rows of `changes` (public_latitude, public_longitude, n) to their
-- spots; each trigger runs it itself, because only the trigger's own function sees the
-- statement's transition tables. Gains go through an upsert; losses through an UPDATE, since an
-- upsert checks `pins >= 0` on the row it proposes before it finds the existing one. A loss
-- always finds its row, and if it ever took a count below zero the CHECK would stop the
-- statement rather than let the counts drift. A spot that empties starts its sums again from 0,
-- so rounding does not build up.
CREATE FUNCTION pin_spots_shift(changes text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format($q$
        WITH delta AS (
            SELECT bookworm_map_spot(public_latitude, public_longitude) AS spot, sum(n)::int AS n,
                   sum(n * public_latitude) AS latitude_sum, sum(n * public_longitude) AS longitude_sum
            FROM (%s) c
            GROUP BY 1 HAVING sum(n) <> 0
        ), losses AS (
            UPDATE pin_spots ps
            SET pins = ps.pins + d.n,
                latitude_sum = CASE WHEN ps.pins + d.n = 0 THEN 0 ELSE ps.latitude_sum + d.latitude_sum END,
                longitude_sum = CASE WHEN ps.pins + d.n = 0 THEN 0 ELSE ps.longitude_sum + d.longitude_sum END
            FROM delta d
            WHERE d.n < 0 AND ps.spot = d.spot
        )
        INSERT INTO pin_spots AS ps (spot, pins, latitude_sum, longitude_sum)
        SELECT spot, n, latitude_sum, longitude_sum FROM delta WHERE n > 0
        ORDER BY spot
        ON CONFLICT (spot) DO UPDATE SET pins = ps.pins + excluded.pins,
            latitude_sum = ps.latitude_sum + excluded.latitude_sum,
            longitude_sum = ps.longitude_sum + excluded.longitude_sum
        $q$, changes)
$$;

-- A statement's pins, as gains and losses of their spots. The owners are locked first, in id
-- order: a suspension (an UPDATE of the user row) then waits for this transaction, or this one
-- waits for the suspension and reads the owner as suspended, so a pin is never counted for an
-- owner whose suspension has already taken their pins away.
CREATE FUNCTION pin_spots_follow_pins() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changes text := CASE TG_OP
        WHEN 'INSERT' THEN 'SELECT owner_id, public_latitude, public_longitude, 1 AS n FROM new_pins'
        WHEN 'DELETE' THEN 'SELECT owner_id, public_latitude, public_longitude, -1 AS n FROM old_pins'
        ELSE 'SELECT owner_id, public_latitude, public_longitude, 1 AS n FROM new_pins
              UNION ALL SELECT owner_id, public_latitude, public_longitude, -1 FROM old_pins' END;
BEGIN
    -- A label or the default flag changed: nothing to count, and no owner to lock. (Nested, so
    -- that an insert's or a delete's trigger never plans a query naming both tables.)
    IF TG_OP = 'UPDATE' THEN
        IF NOT EXISTS (
            SELECT 1 FROM old_pins o JOIN new_pins n USING (id)
            WHERE (o.owner_id, o.public_latitude, o.public_longitude) IS DISTINCT FROM (n.owner_id, n.public_latitude, n.public_longitude)) THEN
            RETURN NULL;
        END IF;
    END IF;
    EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM users WHERE id IN (SELECT owner_id FROM (%s) c)
                    ORDER BY id FOR SHARE) locked', changes);
    EXECUTE pin_spots_shift(format(
        'SELECT * FROM (%s) c WHERE NOT EXISTS (SELECT 1 FROM users su WHERE su.id = c.owner_id AND su.suspended_at IS NOT NULL)',
        changes));
    RETURN NULL;
END $$;
CREATE TRIGGER pins_spots_insert AFTER INSERT ON pins REFERENCING NEW TABLE AS new_pins
    FOR EACH STATEMENT EXECUTE FUNCTION pin_spots_follow_pins();
CREATE TRIGGER pins_spots_delete AFTER DELETE ON pins REFERENCING OLD TABLE AS old_pins
    FOR EACH STATEMENT EXECUTE FUNCTION pin_spots_follow_pins();
CREATE TRIGGER pins_spots_update AFTER UPDATE ON pins REFERENCING OLD TABLE AS old_pins NEW TABLE AS new_pins
    FOR EACH STATEMENT EXECUTE FUNCTION pin_spots_follow_pins();

-- A suspension takes the owner's pins off their spots and a reinstatement puts them back. A
-- suspended owner's pins are put back just before the owner is deleted, because the cascade
-- that deletes the pins can no longer see that the owner was suspended and takes them off.
CREATE FUNCTION pin_spots_follow_owner() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE pin_spots_shift(format(
        'SELECT public_latitude, public_longitude, %s AS n FROM pins WHERE owner_id = %L',
        CASE WHEN TG_OP = 'UPDATE' AND NEW.suspended_at IS NOT NULL THEN -1 ELSE 1 END, OLD.id));
    RETURN OLD;
END $$;
CREATE TRIGGER users_pin_spots_suspension AFTER UPDATE OF suspended_at ON users
    FOR EACH ROW WHEN ((OLD.suspended_at IS NULL) <> (NEW.suspended_at IS NULL))
    EXECUTE FUNCTION pin_spots_follow_owner();
CREATE TRIGGER users_pin_spots_erasure BEFORE DELETE ON users
    FOR EACH ROW WHEN (OLD.suspended_at IS NOT NULL)
    EXECUTE FUNCTION pin_spots_follow_owner();

INSERT INTO pin_spots (spot, pins, latitude_sum, longitude_sum)
SELECT bookworm_map_spot(public_latitude, public_longitude), count(*), sum(public_latitude), sum(public_longitude)
FROM pins p
WHERE NOT EXISTS (SELECT 1 FROM users su WHERE su.id = p.owner_id AND su.suspended_at IS NOT NULL)
GROUP BY 1;
