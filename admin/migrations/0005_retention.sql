-- Retention (issue 12) deletes PROCESSED inbox rows by age in small batches;
-- a BRIN index on received_at finds the old blocks at almost no cost to the
-- bridge's inserts (rows arrive in received_at order).
CREATE INDEX consumer_inbox_received_brin ON consumer_inbox USING brin (received_at);

-- The runtime role never gets DELETE (an append-only audit pipeline):
-- retention goes through these functions, which run as the migration role,
-- delete only PROCESSED inbox rows (never younger than 48 h, see
-- admin/maintenance/housekeeping.h) and poison entries (never younger than
-- 1 h), at most 10,000 rows a call, and return how many they deleted.
CREATE FUNCTION inbox_retention(keep_seconds float8, max_rows integer) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  WITH doomed AS (
    DELETE FROM consumer_inbox WHERE id IN (
      SELECT id FROM consumer_inbox
      WHERE received_at < now() - greatest(keep_seconds, 172800) * interval '1 second'
        AND status = 'PROCESSED'
        AND processed_at < now() - greatest(keep_seconds, 172800) * interval '1 second'
      LIMIT least(max_rows, 10000))
    RETURNING 1)
  SELECT count(*) FROM doomed
$$;

CREATE FUNCTION poison_retention(keep_seconds float8, max_rows integer) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  WITH doomed AS (
    DELETE FROM poison_events WHERE id IN (
      SELECT id FROM poison_events
      WHERE received_at < now() - greatest(keep_seconds, 3600) * interval '1 second'
      ORDER BY received_at LIMIT least(max_rows, 10000))
    RETURNING 1)
  SELECT count(*) FROM doomed
$$;

REVOKE ALL ON FUNCTION inbox_retention(float8, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION poison_retention(float8, integer) FROM PUBLIC;
