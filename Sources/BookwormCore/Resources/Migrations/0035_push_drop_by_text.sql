-- A deleted device's queued pushes are found by comparing ids as text: the cast of every push
-- job's `device` to uuid (0034) failed on a job whose payload was written by hand or by another
-- version, and with it every statement that deletes a device (logout, a password change,
-- erasure) until a worker dropped that job.
CREATE OR REPLACE FUNCTION devices_drop_pushes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM jobs WHERE kind = 'push' AND payload->>'device' IN (SELECT id::text FROM gone);
    RETURN NULL;
END
$$;
