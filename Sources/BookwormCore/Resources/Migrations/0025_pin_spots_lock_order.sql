-- `pin_spots` rows are locked in spot order before a statement shifts them. Before, a pin moved
-- from spot A to spot B locked B (the gain, by the upsert) and then A (the loss, by the UPDATE
-- that PostgreSQL runs after the main statement); a pin moved from B to A at the same moment
-- locked A, then B: a deadlock, and one of the two requests failed. A suspension took its
-- owner's spots in whatever order its UPDATE met them, against an import's gains in spot order.
-- Now every statement first locks the existing spots it will touch, in ascending order, so two
-- statements meet at their first common spot and the later one waits there holding none of
-- the others; new spots are then inserted in spot order, as before.
CREATE FUNCTION pin_spots_lock(changes text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format($q$
        SELECT count(*) FROM (
            SELECT 1 FROM pin_spots
            WHERE spot IN (SELECT bookworm_map_spot(public_latitude, public_longitude) FROM (%s) c)
            ORDER BY spot FOR UPDATE) locked
        $q$, changes)
$$;

CREATE OR REPLACE FUNCTION pin_spots_follow_pins() RETURNS trigger LANGUAGE plpgsql AS $$
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
    EXECUTE pin_spots_lock(changes);
    EXECUTE pin_spots_shift(format(
        'SELECT * FROM (%s) c WHERE NOT EXISTS (SELECT 1 FROM users su WHERE su.id = c.owner_id AND su.suspended_at IS NOT NULL)',
        changes));
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION pin_spots_follow_owner() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changes text := format('SELECT public_latitude, public_longitude, %s AS n FROM pins WHERE owner_id = %L',
                           CASE WHEN TG_OP = 'UPDATE' AND NEW.suspended_at IS NOT NULL THEN -1 ELSE 1 END, OLD.id);
BEGIN
    EXECUTE pin_spots_lock(changes);
    EXECUTE pin_spots_shift(changes);
    RETURN OLD;
END $$;
