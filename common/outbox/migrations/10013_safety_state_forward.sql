-- The owner's safety state moves only forward, whatever its runtime login
-- asks (docs/security.md, "What each credential allows").

-- The attestation mark: never back, never past the numbers handed out, and
-- its time moves only when the mark does (a no-op UPDATE no longer makes a
-- stalled attestation look fresh).
CREATE OR REPLACE FUNCTION outbox_numbers_attested_forward() RETURNS trigger LANGUAGE plpgsql AS $$
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

DROP TRIGGER outbox_numbers_attested_forward ON outbox_numbers_attested;
CREATE TRIGGER outbox_numbers_attested_forward BEFORE INSERT OR UPDATE ON outbox_numbers_attested
  FOR EACH ROW EXECUTE FUNCTION outbox_numbers_attested_forward();

-- Retention deletes no row the attestor has not passed: a number above the
-- mark always still has its row if it was ever committed, so the attestor
-- never voids the number of an event that exists (one kept from Admin by
-- marking it CONFIRMED, then left for retention, included). A row without a
-- number predates numbering.
CREATE OR REPLACE FUNCTION outbox_retention(keep_seconds float8, max_rows integer) RETURNS bigint
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

-- What the owner witnessed of Admin's log: a larger tree replaces the held
-- one, the same size keeps its root and note. accepted_at is the database's
-- clock at a larger tree. The entry id is a stream id that fits Redis's
-- (two 64-bit parts); at the same size it only moves forward (a smaller
-- one is ignored), with a larger tree it is the entry that tree came in.
-- It is a hint, not evidence: before the witness calls an older checkpoint
-- "replayed" it finds that entry in the receipt stream carrying the held
-- checkpoint (witness.cc).
CREATE FUNCTION log_stream_id(id text) RETURNS numeric[] LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN id ~ '^[0-9]{1,20}-[0-9]{1,20}$'
               AND split_part(id, '-', 1)::numeric <= 18446744073709551615
               AND split_part(id, '-', 2)::numeric <= 18446744073709551615
         THEN ARRAY[split_part(id, '-', 1)::numeric, split_part(id, '-', 2)::numeric] END
$$;

-- Ids written before these rules that are not stream ids are forgotten.
UPDATE log_witnessed SET entry_id = '' WHERE entry_id <> '' AND log_stream_id(entry_id) IS NULL;

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
