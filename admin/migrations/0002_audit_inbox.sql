-- Admin's database: the inbox that takes events over from the owner streams,
-- the poison store for entries that can never be taken over, and the audit
-- read model. Admin never reads an owner's tables; it keeps what arrived.

-- consumer_inbox: one row per (consumer, event). The bridge inserts rows
-- PENDING in the transaction that makes them durable, and acknowledges the
-- stream entries only after that commit. Lease consumers then move them
-- PENDING -> PROCESSING (lease + fencing token) -> PROCESSED, or DEAD.
CREATE SEQUENCE consumer_inbox_fencing_token;

CREATE TABLE consumer_inbox (
  id               bigserial PRIMARY KEY,
  -- Which consumer of the event this row is for ("audit_logs").
  consumer         text NOT NULL,
  event_id         uuid NOT NULL,
  owner            text NOT NULL,
  event_type       text NOT NULL,
  -- The serialized ulticode.audit.v1.AuditEvent exactly as the owner
  -- committed it, and its SHA-256 (a re-delivery with other bytes is a
  -- conflict, never an overwrite).
  payload          bytea NOT NULL,
  payload_sha256   bytea NOT NULL,
  stream           text NOT NULL,
  stream_entry_id  text NOT NULL,
  status           text NOT NULL DEFAULT 'PENDING'
                   CHECK (status IN ('PENDING', 'PROCESSING', 'PROCESSED', 'DEAD')),
  -- Claims so far (each claim is one attempt).
  attempts         integer NOT NULL DEFAULT 0,
  next_retry_at    timestamptz NOT NULL DEFAULT now(),
  lease_owner      text,
  lease_expires_at timestamptz,
  -- When the current lease was first taken (heartbeats extend the expiry,
  -- not this): drives "oldest lease age".
  leased_at        timestamptz,
  fencing_token    bigint NOT NULL DEFAULT 0,
  last_error       text,
  -- When the row first failed: drives "oldest retry age".
  first_failed_at  timestamptz,
  received_at      timestamptz NOT NULL DEFAULT now(),
  processed_at     timestamptz,
  CONSTRAINT consumer_inbox_consumer_event UNIQUE (consumer, event_id)
);

-- Claims only ever scan due PENDING rows and PROCESSING rows (for expired
-- leases), however many millions are PROCESSED.
CREATE INDEX consumer_inbox_due ON consumer_inbox (next_retry_at) WHERE status = 'PENDING';
CREATE INDEX consumer_inbox_leased ON consumer_inbox (lease_expires_at) WHERE status = 'PROCESSING';
CREATE INDEX consumer_inbox_dead ON consumer_inbox (received_at) WHERE status = 'DEAD';

-- Wake lease consumers on commit (delivered only if the insert commits), and
-- only when the statement inserted rows (a batch of duplicates inserts none).
CREATE FUNCTION consumer_inbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM new_rows) THEN
    PERFORM pg_notify('consumer_inbox', '');
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER consumer_inbox_notify AFTER INSERT ON consumer_inbox
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION consumer_inbox_notify();

-- poison_events: stream entries that can never be taken over (malformed,
-- forged, or a conflicting duplicate). Stored, counted, acknowledged; never
-- silently dropped.
CREATE TABLE poison_events (
  id              bigserial PRIMARY KEY,
  consumer        text NOT NULL,
  stream          text NOT NULL,
  stream_entry_id text NOT NULL,
  -- The event id the entry claimed, when it had one.
  event_id        text,
  -- Machine-readable reason (admin/inbox/entry_validation.h) and detail.
  reason          text NOT NULL,
  detail          text NOT NULL,
  -- Every field of the entry, in order: {"name": ..., "text": ...}, or
  -- "hex" for binary values, or "omitted_bytes" for values over 64 KiB.
  fields          jsonb NOT NULL,
  received_at     timestamptz NOT NULL DEFAULT now(),
  -- A re-delivery of the same entry (crash before XACK) is stored once.
  CONSTRAINT poison_events_entry UNIQUE (consumer, stream, stream_entry_id)
);
CREATE INDEX poison_events_received ON poison_events (received_at);

-- audit_logs: the audit read model, one row per event id.
CREATE TABLE audit_logs (
  event_id     uuid PRIMARY KEY,
  owner        text NOT NULL,
  event_type   text NOT NULL,
  actor        text NOT NULL,
  subject      text NOT NULL DEFAULT '',
  action       text NOT NULL,
  entity_type  text NOT NULL,
  entity_id    text NOT NULL,
  old_value    jsonb,
  new_value    jsonb,
  client_ip    text NOT NULL DEFAULT '',
  user_agent   text NOT NULL DEFAULT '',
  request_id   text NOT NULL DEFAULT '',
  trace_id     text NOT NULL DEFAULT '',
  occurred_at  timestamptz NOT NULL,
  ingested_at  timestamptz NOT NULL DEFAULT now(),
  -- The owner's exact bytes (for signature checks and the hash chain).
  envelope     bytea NOT NULL
);

-- The query API orders newest first by (occurred_at, event_id) and pages
-- with a keyset cursor on that pair; every filter has an index ending in the
-- same pair, so a page is one index range scan at any table size.
CREATE INDEX audit_logs_recent ON audit_logs (occurred_at DESC, event_id DESC);
CREATE INDEX audit_logs_actor ON audit_logs (actor, occurred_at DESC, event_id DESC);
CREATE INDEX audit_logs_entity ON audit_logs (entity_type, entity_id, occurred_at DESC, event_id DESC);
CREATE INDEX audit_logs_entity_type ON audit_logs (entity_type, occurred_at DESC, event_id DESC);
CREATE INDEX audit_logs_action ON audit_logs (action, occurred_at DESC, event_id DESC);
CREATE INDEX audit_logs_owner ON audit_logs (owner, occurred_at DESC, event_id DESC);
