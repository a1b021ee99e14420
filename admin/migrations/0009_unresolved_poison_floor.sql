-- Unresolved poison is evidence (a forgery, a producer bug) that nobody has
-- looked at yet: it must outlive the alert that reports it. Whatever a caller
-- asks, poison_retention deletes an unresolved entry only after 30 days (a
-- resolved one after an hour, as before); --poison-retention (90 days by
-- default) applies above those floors.
CREATE OR REPLACE FUNCTION poison_retention(keep_seconds float8, max_rows integer) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  WITH doomed AS (
    DELETE FROM poison_events WHERE id IN (
      SELECT id FROM poison_events
      WHERE received_at < now() - greatest(keep_seconds, 3600) * interval '1 second'
        AND (resolved_at IS NOT NULL
             OR received_at < now() - greatest(keep_seconds, 30 * 86400) * interval '1 second')
      ORDER BY received_at LIMIT least(max_rows, 10000))
    RETURNING 1)
  SELECT count(*) FROM doomed
$$;
REVOKE ALL ON FUNCTION poison_retention(float8, integer) FROM PUBLIC;
