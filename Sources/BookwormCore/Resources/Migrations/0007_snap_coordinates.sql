-- Coordinates are kept to a billionth of a degree (about 0.1 mm), as the API now snaps them:
-- a stored value such as 1e-170 made bookworm_distance_km's `^ 2` underflow, which PostgreSQL
-- reports as an error rather than a zero. Snap what older versions stored.
UPDATE pins
SET latitude = round(latitude::numeric, 9)::float8,
    longitude = round(longitude::numeric, 9)::float8,
    public_latitude = round(public_latitude::numeric, 9)::float8,
    public_longitude = round(public_longitude::numeric, 9)::float8
WHERE latitude <> round(latitude::numeric, 9)::float8
   OR longitude <> round(longitude::numeric, 9)::float8
   OR public_latitude <> round(public_latitude::numeric, 9)::float8
   OR public_longitude <> round(public_longitude::numeric, 9)::float8;
