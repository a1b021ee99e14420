-- Idempotency keys of mutating RPCs: a repeated request_id returns the first
-- response and changes nothing more. Keys are scoped to the caller, so one
-- principal can never replay (or read) another's response. Written in the same transaction as the
-- business change and its outbox row, so the three commit or vanish together.
CREATE TABLE idempotency_keys (
  principal   text NOT NULL,
  request_id  text NOT NULL,
  method      text NOT NULL,
  request     bytea NOT NULL,
  response    bytea NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (principal, request_id)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
