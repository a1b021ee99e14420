-- The reference for scripts/bench.sh: the business transaction of CreateUser
-- with the same shape as the mesh's (a users row, a ~400-byte audit_outbox
-- row with the same indexes, an idempotency key), on the same PostgreSQL, as
-- pgbench runs it. No dispatcher, no Admin: what an audited mutation could
-- cost at best.
CREATE TABLE users (
  user_id uuid PRIMARY KEY, username text NOT NULL UNIQUE, email text NOT NULL UNIQUE,
  display_name text NOT NULL, status text NOT NULL, authz_version bigint NOT NULL DEFAULT 1,
  disabled_reason text, created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE audit_outbox (
  event_id uuid PRIMARY KEY, event_type text NOT NULL, payload bytea NOT NULL,
  state text NOT NULL DEFAULT 'PENDING', attempts integer NOT NULL DEFAULT 0,
  failures integer NOT NULL DEFAULT 0, next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_error text, stream_entry_id text, created_at timestamptz NOT NULL DEFAULT now(),
  published_at timestamptz, confirmed_at timestamptz, resends integer NOT NULL DEFAULT 0,
  mac bytea, key_id text);
CREATE INDEX audit_outbox_due ON audit_outbox (next_attempt_at) WHERE state = 'PENDING';
CREATE INDEX audit_outbox_unconfirmed ON audit_outbox (published_at) WHERE state = 'PUBLISHED';
CREATE TABLE idempotency_keys (
  principal text NOT NULL, request_id text NOT NULL, method text NOT NULL,
  request_sha256 bytea NOT NULL, response bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (principal, request_id));
CREATE SEQUENCE audit_outbox_sequence;
