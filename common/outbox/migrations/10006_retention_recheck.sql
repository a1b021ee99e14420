-- Retention deletes only rows that are CONFIRMED and old when it deletes
-- them. The outer DELETE repeats the conditions: under READ COMMITTED a row
-- that a concurrent OutboxOperations/Replay turned PENDING after the inner
-- SELECT saw it is re-checked as committed once its lock is free, and kept.
CREATE OR REPLACE FUNCTION outbox_retention(keep_seconds float8, max_rows integer) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  WITH doomed AS (
    DELETE FROM audit_outbox
    WHERE state = 'CONFIRMED'
      AND confirmed_at < now() - greatest(keep_seconds, 60) * interval '1 second'
      AND event_id IN (
        SELECT event_id FROM audit_outbox
        WHERE created_at < now() - greatest(keep_seconds, 60) * interval '1 second'
          AND state = 'CONFIRMED'
          AND confirmed_at < now() - greatest(keep_seconds, 60) * interval '1 second'
        LIMIT least(max_rows, 10000))
    RETURNING 1)
  SELECT count(*) FROM doomed
$$;
