-- audit_logs as a transparency log (docs/transparency-log.md): every row
-- gets a dense index 0..n-1 in one append-only RFC 9162 Merkle tree,
-- assigned by one sequencer at a time (admin/log/sequencer.h) shortly after
-- the row commits.
ALTER TABLE audit_logs ADD COLUMN log_index bigint;
CREATE UNIQUE INDEX audit_logs_log_index ON audit_logs (log_index) WHERE log_index IS NOT NULL;
CREATE INDEX audit_logs_unsequenced ON audit_logs (ingested_at, event_id) WHERE log_index IS NULL;

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

-- A row's index is set once and never changed.
CREATE FUNCTION audit_logs_index_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.log_index IS NOT NULL AND NEW.log_index IS DISTINCT FROM OLD.log_index THEN
    RAISE EXCEPTION 'audit_logs %: log index % is final', OLD.event_id, OLD.log_index
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER audit_logs_index_once BEFORE UPDATE OF log_index ON audit_logs
  FOR EACH ROW EXECUTE FUNCTION audit_logs_index_once();
