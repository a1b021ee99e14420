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
-- in the stream, where Admin looks next, before this returns. The runtime
-- role has no DELETE on the table: this is the only way a value goes.
CREATE FUNCTION erase_personal_data(p_subject text, p_through timestamptz, p_by text)
RETURNS SETOF uuid LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  erased uuid[];
BEGIN
  LOCK TABLE audit_outbox_personal IN SHARE ROW EXCLUSIVE MODE;
  PERFORM 1 FROM audit_outbox o
    WHERE o.event_id IN (SELECT event_id FROM audit_outbox_personal
                         WHERE subject = p_subject AND occurred_at <= p_through)
    ORDER BY o.event_id FOR UPDATE OF o;
  WITH gone AS (
    DELETE FROM audit_outbox_personal WHERE subject = p_subject AND occurred_at <= p_through
    RETURNING event_id)
  SELECT coalesce(array_agg(event_id), '{}') INTO erased FROM gone;
  INSERT INTO personal_erasures (subject, erased_through, requested_by, values_erased)
    VALUES (p_subject, p_through, p_by, cardinality(erased));
  RETURN QUERY SELECT unnest(erased);
END $$;
REVOKE ALL ON FUNCTION erase_personal_data(text, timestamptz, text) FROM PUBLIC;
