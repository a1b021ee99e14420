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

INSERT INTO log_leaves (log_index, event_id)
  SELECT log_index, event_id FROM audit_logs WHERE log_index IS NOT NULL;
INSERT INTO log_queue (event_id)
  SELECT event_id FROM audit_logs WHERE log_index IS NULL ORDER BY ingested_at, event_id;

CREATE FUNCTION audit_logs_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO log_queue (event_id) SELECT event_id FROM inserted ORDER BY event_id
    ON CONFLICT (event_id) DO NOTHING;
  RETURN NULL;
END $$;
CREATE TRIGGER audit_logs_enqueue AFTER INSERT ON audit_logs
  REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION audit_logs_enqueue();

DROP TRIGGER audit_logs_index_once ON audit_logs;
DROP FUNCTION audit_logs_index_once();
DROP TRIGGER audit_logs_index_unset ON audit_logs;
DROP FUNCTION audit_logs_index_unset();
ALTER TABLE audit_logs DROP COLUMN log_index;
