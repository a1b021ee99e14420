-- The audit outbox of one data owner (shared by Auth and App; versions 10001+
-- belong to the outbox library, below them to the service).
--
-- A row is born PENDING in the same transaction as the business change.
-- A dispatcher claims due rows by pushing next_attempt_at one lease ahead
-- (a visibility timeout, as in pgmq) and stamping a new fencing token; a
-- crashed dispatcher's rows therefore come back by themselves. Only the holder
-- of the current token may mark a row PUBLISHED or reschedule it.
CREATE SEQUENCE audit_outbox_fencing_token;

CREATE TABLE audit_outbox (
  event_id         uuid PRIMARY KEY,
  event_type       text NOT NULL,
  -- The serialized ulticode.audit.v1.AuditEvent, published byte for byte.
  payload          bytea NOT NULL,
  state            text NOT NULL DEFAULT 'PENDING'
                   CHECK (state IN ('PENDING', 'PUBLISHED', 'DEAD')),
  -- Publication attempts (claims) so far.
  attempts         integer NOT NULL DEFAULT 0,
  -- Consecutive failed attempts; drives the back-off.
  failures         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  claim_owner      text,
  claim_expires_at timestamptz,
  fencing_token    bigint NOT NULL DEFAULT 0,
  last_error       text,
  stream_entry_id  text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  published_at     timestamptz
);

-- "Find due rows" only ever scans PENDING rows, however many millions are
-- PUBLISHED.
CREATE INDEX audit_outbox_due ON audit_outbox (next_attempt_at) WHERE state = 'PENDING';
CREATE INDEX audit_outbox_dead ON audit_outbox (created_at) WHERE state = 'DEAD';

-- Wake dispatchers on commit: NOTIFY inside the inserting transaction is
-- delivered only if and when it commits. One notification per statement.
CREATE FUNCTION audit_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('audit_outbox', '');
  RETURN NULL;
END $$;

CREATE TRIGGER audit_outbox_notify AFTER INSERT ON audit_outbox
  FOR EACH STATEMENT EXECUTE FUNCTION audit_outbox_notify();
