-- Personal data (docs/personal-data.md): the values a schema_version 2
-- envelope commits to (common/audit/personal.h), kept apart from the
-- envelope, keyed by the data subject they are about, so that they can be
-- erased while audit_logs, the log and every proof stay as they are.
--
-- A value is stored only if it opens its commitment in the sealed envelope
-- (admin/inbox/entry_validation.h), so a stored value is the true one.
CREATE TABLE personal_values (
  event_id    uuid NOT NULL,
  path        text NOT NULL,
  subject     text NOT NULL,
  value       text NOT NULL,
  salt        bytea NOT NULL CHECK (length(salt) = 32),
  -- The event's occurred_at: an erasure covers the values of events up to
  -- its erased_through.
  occurred_at timestamptz NOT NULL,
  PRIMARY KEY (event_id, path)
);
CREATE INDEX personal_values_subject ON personal_values (subject, occurred_at);

-- Every erasure (AdminOperations.ErasePersonalData), kept: who asked, for
-- which subject, through when, and how many values it erased here. A value
-- arriving later (in flight during the erasure, or delivered again) for a
-- subject erased through a time at or after its event's occurred_at is
-- never stored (personal_values_store).
CREATE TABLE personal_erasures (
  id             bigserial PRIMARY KEY,
  subject        text NOT NULL,
  erased_through timestamptz NOT NULL,
  requested_by   text NOT NULL,
  values_erased  bigint NOT NULL,
  erased_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX personal_erasures_subject ON personal_erasures (subject, erased_through);

-- Erases `subject`'s values of events that occurred through `through` and
-- records the erasure, returning how many values it erased. The lock waits
-- for every transaction that is storing values and holds off new ones
-- until the erasure commits, so none of them can store a value the
-- erasure did not see; after it, personal_erasures keeps them out. The
-- runtime role has no DELETE on personal_values: this is the only way a
-- value goes, and it always leaves its record.
CREATE FUNCTION erase_personal_data(p_subject text, p_through timestamptz, p_by text)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  erased bigint;
BEGIN
  LOCK TABLE personal_values IN SHARE ROW EXCLUSIVE MODE;
  DELETE FROM personal_values WHERE subject = p_subject AND occurred_at <= p_through;
  GET DIAGNOSTICS erased = ROW_COUNT;
  INSERT INTO personal_erasures (subject, erased_through, requested_by, values_erased)
    VALUES (p_subject, p_through, p_by, erased);
  RETURN erased;
END $$;
REVOKE ALL ON FUNCTION erase_personal_data(text, timestamptz, text) FROM PUBLIC;
