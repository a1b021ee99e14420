-- Idempotency keys of mutating RPCs: a repeated request_id returns the first
-- response and changes nothing more. Written in the same transaction as the
-- business change and its outbox row, so the three commit or vanish together.
CREATE TABLE idempotency_keys (
  request_id  text PRIMARY KEY,
  method      text NOT NULL,
  request     bytea NOT NULL,
  response    bytea NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
