-- The audit outbox of one data owner (shared by Auth and App). This schema
-- belongs to the outbox library and is applied after the service's own.
--
-- A row is born PENDING in the same transaction as the business change.
-- A dispatcher's cycle is one transaction: it locks due rows (FOR UPDATE
-- SKIP LOCKED: the lock is the claim), publishes them and marks them
-- PUBLISHED; a crashed dispatcher's rows come back with its rollback.
--
-- Delivery is confirmed by the log, not by the broker: PUBLISHED means
-- "handed to Redis", which may still lose it (a restart without AOF, a
-- failover, FLUSHALL, the stream guard). The row turns CONFIRMED only on an
-- inclusion proof that its event is in Admin's log (outbox/witness.h); a
-- PUBLISHED row whose entry is lost, or that stays unproved after Admin
-- acknowledged it, goes back to PENDING and is published again
-- (outbox/resend.h; the inbox deduplicates).

-- Every event an owner commits takes the next number of this sequence in its
-- business transaction (outbox::Append) and carries it, sealed, in its
-- envelope (AuditEvent.owner_sequence). Admin alerts on numbers that never
-- arrive: an event committed and then kept from Admin (say marked CONFIRMED
-- by someone holding the runtime login) leaves a gap once later events
-- arrive. The runtime role may only take numbers (USAGE: nextval), never set
-- them, and the column is not in its UPDATE grant.
CREATE SEQUENCE audit_outbox_sequence;

CREATE TABLE audit_outbox (
  event_id         uuid PRIMARY KEY,
  event_type       text NOT NULL,
  -- The serialized ulticode.audit.v1.AuditEvent, published byte for byte.
  payload          bytea NOT NULL,
  state            text NOT NULL DEFAULT 'PENDING'
                   CHECK (state IN ('PENDING', 'PUBLISHED', 'CONFIRMED', 'DEAD')),
  -- Publication attempts (claims) so far.
  attempts         integer NOT NULL DEFAULT 0,
  -- Consecutive failed attempts; drives the back-off.
  failures         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  last_error       text,
  stream_entry_id  text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  -- Set by audit_outbox_state_machine, never by the statement.
  published_at     timestamptz,
  -- Set by audit_outbox_state_machine, never by the statement.
  confirmed_at     timestamptz,
  -- Times the row was published again (lost, or unproved).
  resends          integer NOT NULL DEFAULT 0,
  -- HMAC-SHA256 of the payload under a secret derived from the owner's
  -- signing key (outbox::RowMac), made in the business transaction, and the
  -- id of that key. The key is never in the database: a login that can
  -- INSERT rows cannot write one the dispatcher will seal (it checks the MAC
  -- and moves a row whose MAC fails to DEAD). The dispatcher signs a bundle
  -- of rows at a time (common/seal).
  mac              bytea NOT NULL CHECK (length(mac) = 32),
  key_id           text NOT NULL,
  -- The seal (common/seal) the row was first published with and the id of
  -- the key that made it; NULL until then. Every later publication (a lost
  -- entry, Replay, redrive) sends the same seal, so the event's leaf in
  -- Admin's log is the same whichever delivery Admin keeps, and a row Admin
  -- lost comes back exactly as its leaf proves it. A proof sets them to
  -- what the log holds (a publication whose cycle rolled back after its
  -- XADD may have been the one Admin kept).
  seal             bytea,
  sealed_by        text,
  -- Every attempt to publish a row takes the next publication number. A
  -- proof confirms the row only after an attempt above publication_floor:
  -- Replay and redrive (Admin lost the event) set the floor past every
  -- number an earlier attempt can have used, so a proof that arrives before
  -- the row is published again confirms nothing.
  publication      bigint NOT NULL DEFAULT 0,
  publication_floor bigint NOT NULL DEFAULT 0,
  -- The row's number from audit_outbox_sequence; NULL for a row written
  -- without one.
  owner_sequence   bigint
);

-- "Find due rows" only ever scans PENDING rows, however many millions are
-- PUBLISHED.
CREATE INDEX audit_outbox_due ON audit_outbox (next_attempt_at) WHERE state = 'PENDING';
CREATE INDEX audit_outbox_dead ON audit_outbox (created_at) WHERE state = 'DEAD';
-- The resend sweep only scans rows awaiting their proof.
CREATE INDEX audit_outbox_unconfirmed ON audit_outbox (published_at) WHERE state = 'PUBLISHED';
-- Retention finds old blocks through a BRIN index on created_at at almost no
-- cost to inserts (rows arrive in created_at order); the state and
-- confirmed_at checks are applied to the rows of those blocks.
CREATE INDEX audit_outbox_created_brin ON audit_outbox USING brin (created_at);
-- The attestor reads the numbers of recent rows: rows arrive in number
-- order, so a BRIN index finds them at almost no cost to inserts.
CREATE INDEX audit_outbox_owner_sequence_brin ON audit_outbox USING brin (owner_sequence);

-- No NOTIFY on insert: a NOTIFY makes PostgreSQL serialize every notifying
-- commit of the cluster through its WAL flush (a cluster-wide lock held
-- until after commit), which ends group commit. The process that commits a
-- row wakes its own dispatcher (mutation::MutationHooks::after_commit);
-- rows committed elsewhere are found by the poll.

-- What the owner's runtime login may do to an outbox row it did not just
-- write. The event itself (event_id, event_type, payload, mac, key_id,
-- created_at) is not in the runtime role's UPDATE grant (outbox_store.cc,
-- RuntimeGrants), so it cannot be rewritten. This trigger keeps the delivery
-- columns honest:
--   * a row becomes PUBLISHED only from PENDING (or stays PUBLISHED);
--   * it becomes CONFIRMED only from PENDING or PUBLISHED, and only after a
--     publication since it was last replayed (publication > publication_floor);
--   * publication numbers only grow;
--   * published_at and confirmed_at are the database's clock at the moment
--     of that transition, whatever the statement says, and never change
--     otherwise, so a confirmation cannot be back-dated into retention;
--     published_at is the clock at the UPDATE itself (clock_timestamp()),
--     so it falls after the cycle's XADD (the resend sweep bounds its look
--     by it, outbox/resend.h).
-- Any state may go back to PENDING (re-send, replay, redrive) or to DEAD
-- (both are loud: alerted and never deleted).
CREATE FUNCTION audit_outbox_state_machine() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.publication < OLD.publication OR NEW.publication_floor < OLD.publication_floor THEN
    RAISE EXCEPTION 'audit_outbox %: publication numbers only grow', OLD.event_id
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.state = 'PUBLISHED' AND OLD.state NOT IN ('PENDING', 'PUBLISHED') THEN
    RAISE EXCEPTION 'audit_outbox %: % -> PUBLISHED is not a transition', OLD.event_id, OLD.state
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.state = 'CONFIRMED' AND OLD.state <> 'CONFIRMED' THEN
    IF OLD.state NOT IN ('PENDING', 'PUBLISHED') OR NEW.publication <= NEW.publication_floor THEN
      RAISE EXCEPTION 'audit_outbox %: % -> CONFIRMED without a publication since its last replay',
        OLD.event_id, OLD.state USING ERRCODE = 'check_violation';
    END IF;
    NEW.confirmed_at := now();
  ELSE
    NEW.confirmed_at := OLD.confirmed_at;
  END IF;
  IF NEW.state = 'PUBLISHED' AND OLD.state <> 'PUBLISHED' THEN
    NEW.published_at := clock_timestamp();
  ELSE
    NEW.published_at := OLD.published_at;
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER audit_outbox_state_machine BEFORE UPDATE ON audit_outbox
  FOR EACH ROW EXECUTE FUNCTION audit_outbox_state_machine();

-- Idempotency keys of mutating RPCs: a repeated request_id returns the first
-- response and changes nothing more. Keys are scoped to the caller, so one
-- principal can never replay (or read) another's response. Written in the
-- same transaction as the business change and its outbox row, so the three
-- commit or vanish together.
CREATE TABLE idempotency_keys (
  principal      text NOT NULL,
  request_id     text NOT NULL,
  method         text NOT NULL,
  response       bytea NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  -- The SHA-256 of the canonical request (unknown fields dropped,
  -- deterministic serialization), not the request bytes.
  request_sha256 bytea NOT NULL,
  PRIMARY KEY (principal, request_id)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

-- Numbers an owner took and never committed (a rollback, a crashed process,
-- or the up to 32 numbers a sequence skips after a database crash or
-- failover) are attested by the owner itself: NumberAttestor
-- (owner/outbox/number_attestor.h) lists them in a signed
-- `<owner>.outbox.numbers_voided` event once no transaction can still commit
-- them. `through`: every number up to it has been attested (present or
-- voided). A committed row is never voided, whatever its state, so an event
-- kept from Admin still shows as missing there.
CREATE TABLE outbox_numbers_attested (
  singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  through     bigint NOT NULL,
  -- Set by outbox_numbers_attested_forward, never by the statement.
  attested_at timestamptz NOT NULL
);

-- The owner's safety state moves only forward, whatever its runtime login
-- asks (docs/security.md, "What each credential allows").
--
-- The attestation mark: never back, never past the numbers handed out, and
-- its time is the database's and moves only when the mark does (a no-op
-- UPDATE does not make a stalled attestation look fresh). Moved back, the
-- attestor would attest again numbers whose rows retention has deleted
-- since, and so void a suppressed event Admin already reported.
CREATE FUNCTION outbox_numbers_attested_forward() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  handed_out bigint;
BEGIN
  SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END INTO handed_out
    FROM audit_outbox_sequence;
  IF NEW.through > handed_out THEN
    RAISE EXCEPTION 'outbox_numbers_attested: % is past the last number handed out (%)',
      NEW.through, handed_out USING ERRCODE = 'check_violation';
  END IF;
  IF TG_OP = 'INSERT' THEN
    NEW.attested_at := now();
    RETURN NEW;
  END IF;
  IF NEW.through < OLD.through THEN
    RAISE EXCEPTION 'outbox_numbers_attested: the mark only moves forward (% -> %)',
      OLD.through, NEW.through USING ERRCODE = 'check_violation';
  END IF;
  NEW.attested_at := CASE WHEN NEW.through > OLD.through THEN now() ELSE OLD.attested_at END;
  RETURN NEW;
END $$;

CREATE TRIGGER outbox_numbers_attested_forward BEFORE INSERT OR UPDATE ON outbox_numbers_attested
  FOR EACH ROW EXECUTE FUNCTION outbox_numbers_attested_forward();

-- The owner as a witness of Admin's transparency log
-- (docs/transparency-log.md, "Witnesses"): the newest checkpoint of each
-- log it accepted. A checkpoint that does not extend it is refused.
CREATE TABLE log_witnessed (
  origin      text PRIMARY KEY,
  size        bigint NOT NULL,
  root        bytea NOT NULL CHECK (length(root) = 32),
  note        text NOT NULL,
  -- The proof stream entry it last came in: an entry up to this one was
  -- seen before (a restarted reader, another replica behind) and is not a
  -- rollback. Empty, or a Redis stream id (see log_witnessed_forward).
  entry_id    text NOT NULL DEFAULT '',
  -- The witness's own cosignature line of the note's text, made when it
  -- accepted it: a state without one was not written by the witness, which
  -- then judges and cosigns nothing (owner/outbox/witnessed_state.h).
  cosignature text NOT NULL DEFAULT '',
  -- Set by log_witnessed_forward, never by the statement.
  accepted_at timestamptz NOT NULL DEFAULT now()
);

-- A Redis stream id ("<ms>-<seq>", two 64-bit parts) as a comparable pair,
-- or NULL if the text is not one.
CREATE FUNCTION log_stream_id(id text) RETURNS numeric[] LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN id ~ '^[0-9]{1,20}-[0-9]{1,20}$'
               AND split_part(id, '-', 1)::numeric <= 18446744073709551615
               AND split_part(id, '-', 2)::numeric <= 18446744073709551615
         THEN ARRAY[split_part(id, '-', 1)::numeric, split_part(id, '-', 2)::numeric] END
$$;

-- What the owner witnessed of Admin's log: a larger tree replaces the held
-- one, the same size keeps its root and note. accepted_at is the database's
-- clock at a larger tree. The entry id is a stream id that fits Redis's
-- (two 64-bit parts); at the same size it only moves forward (a smaller
-- one is ignored), with a larger tree it is the entry that tree came in.
-- It is a hint, not evidence: before the witness calls an older checkpoint
-- "replayed" it finds that entry in the proof stream carrying the held
-- checkpoint (witness.cc).
CREATE FUNCTION log_witnessed_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.entry_id <> '' AND log_stream_id(NEW.entry_id) IS NULL THEN
    RAISE EXCEPTION 'log_witnessed: entry_id % is not a stream id', NEW.entry_id
      USING ERRCODE = 'check_violation';
  END IF;
  IF TG_OP = 'INSERT' THEN
    NEW.accepted_at := now();
    RETURN NEW;
  END IF;
  IF NEW.origin <> OLD.origin OR NEW.size < OLD.size
     OR (NEW.size = OLD.size AND (NEW.root <> OLD.root OR NEW.note <> OLD.note)) THEN
    RAISE EXCEPTION 'log_witnessed %: the witnessed tree only grows (% -> %)', OLD.origin,
      OLD.size, NEW.size USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.size = OLD.size AND log_stream_id(OLD.entry_id) IS NOT NULL
     AND (NEW.entry_id = '' OR log_stream_id(NEW.entry_id) < log_stream_id(OLD.entry_id)) THEN
    NEW.entry_id := OLD.entry_id;
  END IF;
  NEW.accepted_at := CASE WHEN NEW.size > OLD.size THEN now() ELSE OLD.accepted_at END;
  RETURN NEW;
END $$;

CREATE TRIGGER log_witnessed_forward BEFORE INSERT OR UPDATE ON log_witnessed
  FOR EACH ROW EXECUTE FUNCTION log_witnessed_forward();

-- The runtime role never gets DELETE on the outbox (a compromised service
-- must not be able to erase events before they reach Admin). Retention goes
-- through these functions instead: they run as the migration role, delete
-- only what retention may delete (CONFIRMED rows; keys), never younger than a
-- floor whatever the caller asks, at most 10,000 rows a call, and return how
-- many they deleted.
--
-- Outbox rows: only rows that are CONFIRMED and old when they are deleted.
-- The outer DELETE repeats the conditions: under READ COMMITTED a row that a
-- concurrent OutboxOperations/Replay turned PENDING after the inner SELECT
-- saw it is re-checked as committed once its lock is free, and kept.
-- A row confirmed less than an hour ago is never deleted: an hour is the
-- longest a PUBLISHED row waits before it is re-sent (outbox_store.cc,
-- kRequeueUnproved), so a row is kept at least as long as it could still have been
-- re-sent had it not been confirmed. And no row the attestor has not passed
-- is deleted: a number above the mark always still has its row if it was
-- ever committed, so the attestor never voids the number of an event that
-- exists (one kept from Admin by marking it CONFIRMED, then left for
-- retention, included). A row without a number is not held back by the
-- mark.
CREATE FUNCTION outbox_retention(keep_seconds float8, max_rows integer) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  WITH mark AS (
    SELECT coalesce((SELECT through FROM outbox_numbers_attested), 0) AS through),
  doomed AS (
    DELETE FROM audit_outbox
    WHERE state = 'CONFIRMED'
      AND confirmed_at < now() - greatest(keep_seconds, 3600) * interval '1 second'
      AND (owner_sequence IS NULL OR owner_sequence <= (SELECT through FROM mark))
      AND event_id IN (
        SELECT event_id FROM audit_outbox
        WHERE created_at < now() - greatest(keep_seconds, 3600) * interval '1 second'
          AND state = 'CONFIRMED'
          AND confirmed_at < now() - greatest(keep_seconds, 3600) * interval '1 second'
          AND (owner_sequence IS NULL OR owner_sequence <= (SELECT through FROM mark))
        LIMIT least(max_rows, 10000))
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

REVOKE ALL ON FUNCTION outbox_retention(float8, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency_retention(float8, integer) FROM PUBLIC;

-- Personal data (docs/personal-data.md): the values an outbox row's
-- schema_version 2 envelope commits to (common/audit/personal.h), written in
-- the business transaction beside the row, published beside the envelope
-- (the stream entry's `personal` field) and kept with the row, keyed by
-- the data subject, until the row goes (retention) or the subject's values
-- are erased (OutboxOperations.ErasePersonalData).
CREATE TABLE audit_outbox_personal (
  event_id    uuid NOT NULL REFERENCES audit_outbox (event_id) ON DELETE CASCADE,
  path        text NOT NULL,
  subject     text NOT NULL,
  value       text NOT NULL,
  salt        bytea NOT NULL CHECK (length(salt) = 32),
  occurred_at timestamptz NOT NULL,
  PRIMARY KEY (event_id, path)
);
CREATE INDEX audit_outbox_personal_subject ON audit_outbox_personal (subject, occurred_at);

-- Every erasure this owner carried out. A business transaction that commits
-- after an erasure does not write the values of a subject erased through
-- its event's time or later (outbox::Append).
CREATE TABLE personal_erasures (
  id             bigserial PRIMARY KEY,
  subject        text NOT NULL,
  erased_through timestamptz NOT NULL,
  requested_by   text NOT NULL,
  values_erased  bigint NOT NULL,
  erased_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX personal_erasures_subject ON personal_erasures (subject, erased_through);

-- Erases `subject`'s values of events up to `through` and records the
-- erasure; returns the event id of each value it erased. The table lock waits for every
-- business transaction that wrote values (they commit or roll back first)
-- and holds off new ones until the erasure commits; the row locks wait for
-- a dispatcher cycle that is publishing one of the rows, so its values are
-- in the stream, where Admin looks next, before this returns (only PENDING
-- rows: the ones a cycle holds; a CONFIRMED one may be going with its
-- retention, whose cascade then waits here without a deadlock). The
-- responses kept for repeated request ids that name the subject go too:
-- a user's creation answers with the user's names. The runtime role has
-- no DELETE on either table: this is the only way a value goes.
CREATE FUNCTION erase_personal_data(p_subject text, p_through timestamptz, p_by text)
RETURNS SETOF uuid LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  erased uuid[];
BEGIN
  -- An empty subject is in every response: it would delete every kept
  -- response. A subject is 1..256 characters without space or control
  -- character (audit::ValidateSubject), here as everywhere.
  IF p_subject IS NULL OR char_length(p_subject) NOT BETWEEN 1 AND 256
     OR p_subject ~ '[[:space:][:cntrl:]]' OR p_through IS NULL THEN
    RAISE EXCEPTION 'erase_personal_data: subject "%" is empty or malformed, or through is missing',
      left(coalesce(p_subject, ''), 64) USING ERRCODE = 'invalid_parameter_value';
  END IF;
  LOCK TABLE audit_outbox_personal IN SHARE ROW EXCLUSIVE MODE;
  PERFORM 1 FROM audit_outbox o
    WHERE o.event_id IN (SELECT event_id FROM audit_outbox_personal
                         WHERE subject = p_subject AND occurred_at <= p_through)
      AND o.state = 'PENDING'
    ORDER BY o.event_id FOR UPDATE OF o;
  DELETE FROM idempotency_keys
    WHERE position(convert_to(p_subject, 'UTF8') in response) > 0;
  WITH gone AS (
    DELETE FROM audit_outbox_personal WHERE subject = p_subject AND occurred_at <= p_through
    RETURNING event_id)
  SELECT coalesce(array_agg(event_id), '{}') INTO erased FROM gone;
  INSERT INTO personal_erasures (subject, erased_through, requested_by, values_erased)
    VALUES (p_subject, p_through, p_by, cardinality(erased));
  RETURN QUERY SELECT unnest(erased);
END $$;
REVOKE ALL ON FUNCTION erase_personal_data(text, timestamptz, text) FROM PUBLIC;

-- An erasure is on its way to the log with its deletion: the transaction
-- that records it also writes the owner's <owner>.personal_data.erased
-- event naming the subject into the outbox (checked at commit), so the
-- runtime login cannot erase unseen; OutboxOperations.ErasePersonalData
-- writes both.
CREATE FUNCTION personal_erasures_logged() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  IF NOT EXISTS (
      SELECT 1 FROM audit_outbox o
      WHERE o.event_type LIKE '%.personal_data.erased'
        AND o.xmin::text = (txid_current() % 4294967296)::text
        AND position(convert_to(NEW.subject, 'UTF8') IN o.payload) > 0) THEN
    RAISE EXCEPTION 'personal_erasures: an erasure of % without its personal_data.erased event in the outbox, written with it',
      NEW.subject USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER personal_erasures_logged AFTER INSERT OR UPDATE ON personal_erasures
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION personal_erasures_logged();
