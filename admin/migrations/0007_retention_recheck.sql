-- Retention deletes only rows that are PROCESSED and old when it deletes
-- them: the outer DELETE repeats the conditions, so a row whose status
-- changed after the inner SELECT saw it is re-checked as committed (READ
-- COMMITTED) and kept.
CREATE OR REPLACE FUNCTION inbox_retention(keep_seconds float8, max_rows integer) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  WITH doomed AS (
    DELETE FROM consumer_inbox
    WHERE status = 'PROCESSED'
      AND processed_at < now() - greatest(keep_seconds, 172800) * interval '1 second'
      AND id IN (
        SELECT id FROM consumer_inbox
        WHERE received_at < now() - greatest(keep_seconds, 172800) * interval '1 second'
          AND status = 'PROCESSED'
          AND processed_at < now() - greatest(keep_seconds, 172800) * interval '1 second'
        LIMIT least(max_rows, 10000))
    RETURNING 1)
  SELECT count(*) FROM doomed
$$;
