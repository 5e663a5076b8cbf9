-- The sync horizon (0013) counts only this database's transactions. `pg_snapshot_xmin` is the
-- oldest transaction running anywhere in the cluster, so a long one in another database (another
-- application's, a CREATE DATABASE, a dump or migration elsewhere) held every user's sync back,
-- though it can never write a row here.
--
-- A transaction still running at the statement's snapshot is passed over only when the activity
-- view shows it as the transaction of a backend connected to another database: a backend never
-- changes database and a transaction id is never handed out twice, so that one cannot write
-- here. One not found there (it ended meanwhile, it is a subtransaction or a prepared
-- transaction, or its backend has no database) holds the horizon back as before. The view's
-- `datid` and `backend_xid` are shown to every role.
--
-- PL/pgSQL, not SQL: a SQL function with a FROM clause is planned again on every call (0.25 ms
-- more per page in pgbench); this one keeps its plan for the session, and when nothing is
-- running (xmin = xmax) it reads no activity at all.
CREATE FUNCTION bookworm_sync_horizon() RETURNS xid8 LANGUAGE plpgsql STABLE AS $$
DECLARE
    snap pg_snapshot := pg_current_snapshot();
BEGIN
    IF pg_snapshot_xmin(snap) = pg_snapshot_xmax(snap) THEN
        RETURN pg_snapshot_xmax(snap);
    END IF;
    RETURN coalesce(
        (SELECT min(x.xid) FROM pg_snapshot_xip(snap) AS x(xid)
         WHERE NOT EXISTS (SELECT 1 FROM pg_stat_get_activity(NULL) a
                           WHERE a.backend_xid = x.xid::xid
                             AND a.datid <> (SELECT oid FROM pg_database WHERE datname = current_database()))),
        pg_snapshot_xmax(snap));
END
$$;
