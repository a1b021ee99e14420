-- AIP-155 request ids of Admin's operator mutations (RequeueDeadInbox,
-- DiscardPoison, ReplayPoison): a repeated request_id returns the first
-- response and changes nothing more. Keys are scoped to the caller and
-- written in the same transaction as the change and its audit record
-- (common/mutation/idempotency.h), the owners' table shape.
CREATE TABLE idempotency_keys (
  principal      text NOT NULL,
  request_id     text NOT NULL,
  method         text NOT NULL,
  request_sha256 bytea NOT NULL,
  response       bytea NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (principal, request_id)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

-- Retention without DELETE for the runtime role, like inbox_retention.
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
REVOKE ALL ON FUNCTION idempotency_retention(float8, integer) FROM PUBLIC;
