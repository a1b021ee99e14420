-- Retention (issue 12) deletes CONFIRMED rows by age in small batches. A BRIN
-- index on created_at finds the old blocks at almost no cost to inserts
-- (rows arrive in created_at order); the state and confirmed_at checks are
-- applied to the rows of those blocks.
CREATE INDEX audit_outbox_created_brin ON audit_outbox USING brin (created_at);

-- The runtime role never gets DELETE on the outbox (a compromised service
-- must not be able to erase events before they reach Admin). Retention goes
-- through these functions instead: they run as the migration role, delete
-- only what retention may delete (CONFIRMED rows; keys), never younger than a
-- floor whatever the caller asks, at most 10,000 rows a call, and return how
-- many they deleted.
CREATE FUNCTION outbox_retention(keep_seconds float8, max_rows integer) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  WITH doomed AS (
    DELETE FROM audit_outbox WHERE event_id IN (
      SELECT event_id FROM audit_outbox
      WHERE created_at < now() - greatest(keep_seconds, 60) * interval '1 second'
        AND state = 'CONFIRMED'
        AND confirmed_at < now() - greatest(keep_seconds, 60) * interval '1 second'
      LIMIT least(max_rows, 10000))
    RETURNING 1)
  SELECT count(*) FROM doomed
$$;

CREATE FUNCTION idempotency_retention(keep_seconds float8, max_rows integer) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  WITH doomed AS (
    DELETE FROM idempotency_keys WHERE (principal, request_id) IN (
      SELECT principal, request_id FROM idempotency_keys
      WHERE created_at < now() - greatest(keep_seconds, 60) * interval '1 second'
      ORDER BY created_at LIMIT least(max_rows, 10000))
    RETURNING 1)
  SELECT count(*) FROM doomed
$$;

REVOKE ALL ON FUNCTION outbox_retention(float8, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency_retention(float8, integer) FROM PUBLIC;
