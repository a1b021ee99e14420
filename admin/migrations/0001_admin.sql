-- Admin's database: the inbox that takes events over from the owner streams,
-- the poison store for entries that can never be taken over, the audit read
-- model and the transparency log over it. Admin never reads an owner's
-- tables; it keeps what arrived.

-- consumer_inbox: one row per (consumer, event). The bridge inserts first
-- deliveries PROCESSED together with their audit_logs rows (one
-- transaction), acknowledging the stream entries only after that commit.
-- When that transaction fails it falls back to inserting the row PENDING;
-- lease consumers then move it PENDING -> PROCESSING (lease + fencing token)
-- -> PROCESSED, or DEAD.
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
  -- conflict, never an overwrite). Each payload is kept once: a row written
  -- PROCESSED together with its audit_logs row keeps only the SHA-256, which
  -- is all a re-delivery is compared with (the envelope and its seal live
  -- in audit_logs). A row the lease consumer must still write (PENDING,
  -- and so PROCESSING and DEAD) keeps both (consumer_inbox_payload_kept).
  payload          bytea,
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
  -- The envelope's seal (common/seal/seal.h: its path to a bundle root the
  -- owner's key signed) and that key's id, kept for the writer.
  seal             bytea,
  key_id           text,
  CONSTRAINT consumer_inbox_consumer_event UNIQUE (consumer, event_id),
  CONSTRAINT consumer_inbox_payload_kept CHECK (status = 'PROCESSED' OR payload IS NOT NULL)
);

-- Claims only ever scan due PENDING rows and PROCESSING rows (for expired
-- leases), however many millions are PROCESSED.
CREATE INDEX consumer_inbox_due ON consumer_inbox (next_retry_at) WHERE status = 'PENDING';
CREATE INDEX consumer_inbox_leased ON consumer_inbox (lease_expires_at) WHERE status = 'PROCESSING';
CREATE INDEX consumer_inbox_dead ON consumer_inbox (received_at) WHERE status = 'DEAD';
-- Retention deletes PROCESSED rows by age in small batches; a BRIN index on
-- received_at finds the old blocks at almost no cost to the bridge's inserts
-- (rows arrive in received_at order).
CREATE INDEX consumer_inbox_received_brin ON consumer_inbox USING brin (received_at);

-- Wake lease consumers on commit (delivered only if the insert commits), and
-- only when the statement inserted rows that are work for them: PENDING ones
-- (a batch of duplicates inserts none, and rows inserted PROCESSED need no
-- consumer).
CREATE FUNCTION consumer_inbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM new_rows WHERE status = 'PENDING') THEN
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
--
-- A stream entry id can repeat: Redis restarted without its data, on a host
-- whose clock is behind, hands out ids it handed out before. A re-delivery
-- of the same entry has the same fields; another entry under a repeated id
-- has other fields. So a poison row is unique per entry id AND fields
-- (poison_events_entry): a re-delivery (crash before XACK) is stored once,
-- and another entry is never dropped as one.
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
  -- Operators resolve poison entries (AdminOperations.DiscardPoison and
  -- ReplayPoison) without deleting them: the entry stays as evidence until
  -- --poison-retention, marked with when and how it was resolved.
  resolved_at     timestamptz,
  resolution      text CHECK (resolution IN ('discarded', 'replayed')),
  -- SHA-256 of the stored fields, computed here (poison_events_fields_sha256,
  -- BEFORE INSERT), never by the caller.
  fields_sha256   bytea NOT NULL,
  CONSTRAINT poison_events_entry UNIQUE (consumer, stream, stream_entry_id, fields_sha256)
);
CREATE INDEX poison_events_received ON poison_events (received_at);
CREATE INDEX poison_events_unresolved ON poison_events (id) WHERE resolved_at IS NULL;

CREATE FUNCTION poison_events_fields_sha256() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  NEW.fields_sha256 := sha256(convert_to(NEW.fields::text, 'UTF8'));
  RETURN NEW;
END
$$;
CREATE TRIGGER poison_events_fields_sha256 BEFORE INSERT ON poison_events
  FOR EACH ROW EXECUTE FUNCTION poison_events_fields_sha256();

-- audit_logs: the audit read model, one row per event id.
CREATE TABLE audit_logs (
  event_id       uuid PRIMARY KEY,
  owner          text NOT NULL,
  event_type     text NOT NULL,
  actor          text NOT NULL,
  subject        text NOT NULL DEFAULT '',
  action         text NOT NULL,
  entity_type    text NOT NULL,
  entity_id      text NOT NULL,
  old_value      jsonb,
  new_value      jsonb,
  client_ip      text NOT NULL DEFAULT '',
  user_agent     text NOT NULL DEFAULT '',
  request_id     text NOT NULL DEFAULT '',
  trace_id       text NOT NULL DEFAULT '',
  occurred_at    timestamptz NOT NULL,
  ingested_at    timestamptz NOT NULL DEFAULT now(),
  -- The owner's exact bytes (for seal checks and the log's leaf).
  envelope       bytea NOT NULL,
  -- The envelope's seal (common/seal/seal.h): its index in a bundle, the
  -- bundle's size, its path to the bundle's root and the owner's Ed25519
  -- signature of that root; and the id of the key. Kept beside the envelope
  -- so that any row can be re-verified later by someone holding only the
  -- owner's public key (audit_logs_signed).
  seal           bytea,
  key_id         text,
  -- The owner's number for the event (AuditEvent.owner_sequence, sealed in
  -- the envelope); NULL for Admin's own records. SequenceWatch
  -- (admin/maintenance/sequence_watch.h) reports the numbers that never
  -- arrive, as owner_sequence_gaps.
  owner_sequence bigint
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
CREATE INDEX audit_logs_owner_sequence ON audit_logs (owner, owner_sequence)
  WHERE owner_sequence IS NOT NULL;

-- A new audit row carries an owner's seal (version 1: 9 bytes of header,
-- 0 to 16 path hashes, a 64-byte Ed25519 signature) and the id of the key
-- that made it, so no credential of Admin's runtime can write a row that no
-- owner sealed. Whether the seal verifies is for the readers of the log
-- (ulticode-verify).
ALTER TABLE audit_logs ADD CONSTRAINT audit_logs_signed
  CHECK (seal IS NOT NULL AND substring(seal from 1 for 1) = '\x01'::bytea
         AND length(seal) BETWEEN 73 AND 585 AND (length(seal) - 73) % 32 = 0
         AND key_id IS NOT NULL AND key_id <> '');

-- Per owner: every number up to `through` has been examined; `horizon` is
-- the highest number seen at `horizon_at`, examined once the grace passed.
CREATE TABLE owner_sequence_checked (
  owner      text PRIMARY KEY,
  through    bigint NOT NULL,
  horizon    bigint NOT NULL,
  horizon_at timestamptz NOT NULL
);

-- Numbers that had not arrived a grace period after higher ones had: one
-- row per run of missing numbers. Resolved (never deleted) when all of them
-- arrive after all.
CREATE TABLE owner_sequence_gaps (
  owner         text NOT NULL,
  first_missing bigint NOT NULL,
  last_missing  bigint NOT NULL,
  found_at      timestamptz NOT NULL DEFAULT now(),
  resolved_at   timestamptz,
  PRIMARY KEY (owner, first_missing)
);

-- audit_logs as a transparency log (docs/transparency-log.md): every row
-- gets a dense index 0..n-1 in one append-only RFC 9162 Merkle tree,
-- assigned by one sequencer at a time (admin/log/sequencer.h) shortly after
-- the row commits.

-- The hash of every complete subtree (common/tlog/stored.h): node (level,
-- idx) covers leaves [idx * 2^level, (idx + 1) * 2^level). Written once.
CREATE TABLE log_nodes (
  level smallint NOT NULL,
  idx   bigint NOT NULL,
  hash  bytea NOT NULL CHECK (length(hash) = 32),
  PRIMARY KEY (level, idx)
);

-- Every checkpoint the log signed (C2SP signed note), kept.
CREATE TABLE log_checkpoints (
  size      bigint PRIMARY KEY,
  root      bytea NOT NULL CHECK (length(root) = 32),
  note      text NOT NULL,
  signed_at timestamptz NOT NULL DEFAULT now()
);

-- The owners as witnesses of the transparency log (docs/transparency-log.md):
-- per witness, the checkpoint it cosigned last and what Admin sent it; and
-- every cosignature (c2sp.org/tlog-cosignature, cosignature/v1),
-- kept like the checkpoints.
CREATE TABLE log_witnesses (
  witness       text PRIMARY KEY,
  -- The size of the checkpoint it cosigned last.
  cosigned_size bigint NOT NULL DEFAULT 0,
  -- Its events below this index have had their inclusion proofs sent with
  -- the latest checkpoint.
  proved_size   bigint NOT NULL DEFAULT 0,
  -- The size of the checkpoint whose send was cut short (more proofs to
  -- come), 0 when none: later sends carry that checkpoint, not a newer one,
  -- until its last proof went out.
  proving_size  bigint NOT NULL DEFAULT 0,
  sent_at       timestamptz,
  -- The last entry of its cosignature stream read.
  cursor        text NOT NULL DEFAULT '0-0',
  -- When the witness made the cosignature Admin last took as its answer. A
  -- cosignature made before it (an old line written to the cosignature
  -- stream again) does not lower what Admin believes the witness cosigned:
  -- only a newer answer moves cosigned_size, up or down (a witness restored
  -- from a backup answers anew, with a newer time).
  cosigned_at   timestamptz
);

CREATE TABLE log_cosignatures (
  size        bigint NOT NULL,
  witness     text NOT NULL,
  line        text NOT NULL,
  cosigned_at timestamptz NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (size, witness)
);

-- Confirmation on proof (docs/transparency-log.md, "Witnesses"): an owner
-- confirms an outbox row only on proof that its event is in the log, sent
-- with the checkpoint that covers it. An event delivered again has not been
-- confirmed by its owner: the bridge asks for its proof to be sent again.
CREATE TABLE log_proof_requests (
  event_id     uuid PRIMARY KEY,
  owner        text NOT NULL,
  requested_at timestamptz NOT NULL DEFAULT now()
);

-- The log's leaves in a table of their own (docs/transparency-log.md,
-- "Sequencer"): the sequencer appends (log_index, event_id) rows instead of
-- updating audit_logs, where every update would write a new row version
-- into each of its indexes. New audit rows wait in log_queue, filled by a
-- trigger in the transaction that inserts them, in insertion order.
CREATE TABLE log_leaves (
  log_index bigint PRIMARY KEY CHECK (log_index >= 0),
  event_id  uuid NOT NULL UNIQUE
);

CREATE TABLE log_queue (
  seq      bigserial PRIMARY KEY,
  event_id uuid NOT NULL UNIQUE
);

CREATE FUNCTION audit_logs_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO log_queue (event_id) SELECT event_id FROM inserted ORDER BY event_id
    ON CONFLICT (event_id) DO NOTHING;
  RETURN NULL;
END $$;
CREATE TRIGGER audit_logs_enqueue AFTER INSERT ON audit_logs
  REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION audit_logs_enqueue();

-- Completeness of the log (docs/transparency-log.md, "Completeness"): no
-- credential of Admin's runtime can keep a committed audit row out of the
-- log. The runtime role has no DELETE on log_queue (admin.cc
-- RuntimeGrants): the queue is emptied only by its sequencer, through
-- log_queue_done, which removes an entry once its event is a leaf with its
-- stored leaf hash, or once its audit row is gone (which the runtime role,
-- without DELETE on audit_logs, cannot cause).
CREATE FUNCTION log_queue_done(ids uuid[]) RETURNS SETOF uuid
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  DELETE FROM log_queue q WHERE q.event_id = ANY(ids)
    AND (EXISTS (SELECT 1 FROM log_leaves l JOIN log_nodes n ON n.level = 0 AND n.idx = l.log_index
                 WHERE l.event_id = q.event_id)
         OR NOT EXISTS (SELECT 1 FROM audit_logs a WHERE a.event_id = q.event_id))
  RETURNING q.event_id
$$;
REVOKE ALL ON FUNCTION log_queue_done(uuid[]) FROM PUBLIC;

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

-- The runtime role never gets DELETE (an append-only audit pipeline):
-- retention goes through these functions, which run as the migration role,
-- delete only what retention may delete, never younger than a floor
-- whatever the caller asks, at most 10,000 rows a call, and return how many
-- they deleted.
--
-- Inbox rows: only rows that are PROCESSED and old (never younger than 48 h,
-- see admin/maintenance/housekeeping.h) when they are deleted: the outer
-- DELETE repeats the conditions, so a row whose status changed after the
-- inner SELECT saw it is re-checked as committed (READ COMMITTED) and kept.
CREATE FUNCTION inbox_retention(keep_seconds float8, max_rows integer) RETURNS bigint
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

-- Poison entries: unresolved poison is evidence (a forgery, a producer bug)
-- that nobody has looked at yet: it must outlive the alert that reports it.
-- Whatever a caller asks, an unresolved entry is deleted only after 30 days,
-- a resolved one after an hour; --poison-retention (90 days by default)
-- applies above those floors.
CREATE FUNCTION poison_retention(keep_seconds float8, max_rows integer) RETURNS bigint
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

-- Idempotency keys: oldest first, never younger than a minute.
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

REVOKE ALL ON FUNCTION inbox_retention(float8, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION poison_retention(float8, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency_retention(float8, integer) FROM PUBLIC;

-- Personal data (docs/personal-data.md): the values a schema_version 2
-- envelope commits to (common/audit/personal.h), kept apart from the
-- envelope, keyed by the data subject they are about, so that they can be
-- erased while audit_logs, the log and every proof stay as they are.
--
-- Admin stores a value only if it opens its commitment in the sealed
-- envelope (admin/inbox/entry_validation.h). The table holds each row's
-- commitment, checked against the row itself as it is written
-- (personal_values_checked), and a read takes only the row whose
-- commitment is the envelope's: a row a runtime login wrote for another
-- commitment is never the event's value and cannot stand in its way, and
-- one that claims the envelope's commitment cannot be written without the
-- value and salt that open it.
CREATE TABLE personal_values (
  event_id    uuid NOT NULL,
  path        text NOT NULL,
  subject     text NOT NULL,
  value       text NOT NULL,
  salt        bytea NOT NULL CHECK (length(salt) = 32),
  commitment  bytea NOT NULL,
  -- The event's occurred_at: an erasure covers the values of events up to
  -- its erased_through.
  occurred_at timestamptz NOT NULL,
  PRIMARY KEY (event_id, path, commitment)
);
CREATE INDEX personal_values_subject ON personal_values (subject, occurred_at);

-- A data subject as audit::ValidateSubject takes it, as far as SQL can
-- tell: 1..256 characters, no space or control character.
CREATE FUNCTION personal_subject_ok(p_subject text) RETURNS boolean
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog AS $$
  SELECT p_subject IS NOT NULL AND char_length(p_subject) BETWEEN 1 AND 256
     AND p_subject !~ '[[:space:][:cntrl:]]'
$$;

-- audit::Commitment (common/audit/personal.h): SHA-256 of the domain, then
-- each field as a 4-byte big-endian length and its bytes.
CREATE FUNCTION personal_commitment(p_event_id uuid, p_path text, p_subject text, p_salt bytea,
                                    p_value text) RETURNS bytea
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog AS $$
  SELECT sha256(convert_to('ulticode/personal-value/v1', 'UTF8')
    || int4send(octet_length(p_event_id::text)) || convert_to(p_event_id::text, 'UTF8')
    || int4send(octet_length(p_path)) || convert_to(p_path, 'UTF8')
    || int4send(octet_length(p_subject)) || convert_to(p_subject, 'UTF8')
    || int4send(length(p_salt)) || p_salt
    || int4send(octet_length(p_value)) || convert_to(p_value, 'UTF8'))
$$;

-- Every erasure (AdminOperations.ErasePersonalData), kept: who asked, for
-- which subject, through when, and how many values it erased here. A value
-- arriving later (in flight during the erasure, or delivered again) for a
-- subject erased through a time at or after its event's occurred_at is
-- never stored (personal_values_store).
--
-- An erasure is in the log with its deletion: event_id is its
-- admin.personal_data.erased record, written in the same transaction
-- (checked at commit by personal_erasures_logged), naming the subject and
-- erased_through. A read shows a value erased only by such an erasure.
CREATE TABLE personal_erasures (
  id             bigserial PRIMARY KEY,
  subject        text NOT NULL CHECK (personal_subject_ok(subject)),
  erased_through timestamptz NOT NULL,
  requested_by   text NOT NULL,
  values_erased  bigint NOT NULL,
  event_id       uuid NOT NULL REFERENCES audit_logs (event_id) DEFERRABLE INITIALLY DEFERRED,
  erased_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX personal_erasures_subject ON personal_erasures (subject, erased_through);

CREATE FUNCTION personal_erasures_logged() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  IF NOT EXISTS (
      SELECT 1 FROM audit_logs a
      WHERE a.event_id = NEW.event_id AND a.event_type = 'admin.personal_data.erased'
        AND a.entity_id = NEW.subject AND a.xmin::text = (txid_current() % 4294967296)::text
        AND abs(extract(epoch FROM (a.new_value->>'erased_through')::timestamptz
                                   - NEW.erased_through)) < 0.001) THEN
    RAISE EXCEPTION 'personal_erasures: an erasure of % through % without its record in the log (event %, admin.personal_data.erased, written with it)',
      NEW.subject, NEW.erased_through, NEW.event_id USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER personal_erasures_logged AFTER INSERT OR UPDATE ON personal_erasures
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION personal_erasures_logged();

-- Every row as it is written: its commitment is its own, its subject well
-- formed, and no logged erasure covers it (an erased value is never
-- written back, whoever writes it).
CREATE FUNCTION personal_values_checked() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  IF NOT personal_subject_ok(NEW.subject) THEN
    RAISE EXCEPTION 'personal_values: subject "%" is empty or malformed', left(NEW.subject, 64)
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.commitment IS DISTINCT FROM
     personal_commitment(NEW.event_id, NEW.path, NEW.subject, NEW.salt, NEW.value) THEN
    RAISE EXCEPTION 'personal_values: event % %: the value and salt do not open the row''s commitment',
      NEW.event_id, NEW.path USING ERRCODE = 'check_violation';
  END IF;
  -- The event's own time when it is in audit_logs, whatever the row says.
  NEW.occurred_at := coalesce((SELECT a.occurred_at FROM audit_logs a
                               WHERE a.event_id = NEW.event_id), NEW.occurred_at);
  IF EXISTS (SELECT 1 FROM personal_erasures e
             WHERE e.subject = NEW.subject AND e.erased_through >= NEW.occurred_at) THEN
    RAISE EXCEPTION 'personal_values: event % %: subject "%" was erased through its time',
      NEW.event_id, NEW.path, NEW.subject USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER personal_values_checked BEFORE INSERT OR UPDATE ON personal_values
  FOR EACH ROW EXECUTE FUNCTION personal_values_checked();

-- Erases `subject`'s values of events that occurred through `through` and
-- records the erasure with its logged record `p_event_id` (written in the
-- same transaction, checked at commit), returning how many values it
-- erased. The lock waits
-- for every transaction that is storing values and holds off new ones
-- until the erasure commits, so none of them can store a value the
-- erasure did not see; after it, personal_erasures keeps them out. The
-- runtime role has no DELETE on personal_values: this is the only way a
-- value goes, and it always leaves its record.
CREATE FUNCTION erase_personal_data(p_subject text, p_through timestamptz, p_by text,
                                    p_event_id uuid)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  erased bigint;
BEGIN
  IF NOT personal_subject_ok(p_subject) OR p_through IS NULL OR p_event_id IS NULL THEN
    RAISE EXCEPTION 'erase_personal_data: subject "%" is empty or malformed, or through or event id is missing',
      left(coalesce(p_subject, ''), 64) USING ERRCODE = 'invalid_parameter_value';
  END IF;
  LOCK TABLE personal_values IN SHARE ROW EXCLUSIVE MODE;
  DELETE FROM personal_values WHERE subject = p_subject AND occurred_at <= p_through;
  GET DIAGNOSTICS erased = ROW_COUNT;
  INSERT INTO personal_erasures (subject, erased_through, requested_by, values_erased, event_id)
    VALUES (p_subject, p_through, p_by, erased, p_event_id);
  RETURN erased;
END $$;
REVOKE ALL ON FUNCTION erase_personal_data(text, timestamptz, text, uuid) FROM PUBLIC;
