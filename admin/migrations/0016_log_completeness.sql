-- Completeness of the log (docs/transparency-log.md, "Completeness"): no
-- credential of Admin's runtime can keep a committed audit row out of the
-- log, or write one that no owner signed.
--
-- The queue is emptied only by its sequencer, through log_queue_done: it
-- removes an entry once its event is a leaf with its stored leaf hash, or
-- once its audit row is gone (which the runtime role, without DELETE on
-- audit_logs, cannot cause).
-- The runtime role loses DELETE on log_queue (admin.cc RuntimeGrants).
CREATE FUNCTION log_queue_done(ids uuid[]) RETURNS SETOF uuid
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  DELETE FROM log_queue q WHERE q.event_id = ANY(ids)
    AND (EXISTS (SELECT 1 FROM log_leaves l JOIN log_nodes n ON n.level = 0 AND n.idx = l.log_index
                 WHERE l.event_id = q.event_id)
         OR NOT EXISTS (SELECT 1 FROM audit_logs a WHERE a.event_id = q.event_id))
  RETURNING q.event_id
$$;
REVOKE ALL ON FUNCTION log_queue_done(uuid[]) FROM PUBLIC;

-- A new audit row carries an owner's signature: a 64-byte Ed25519
-- signature and the id of the key that made it. Rows written before events
-- were signed keep theirs (NOT VALID: only new rows are checked). Whether
-- the signature verifies is for the readers of the log (ulticode-verify).
ALTER TABLE audit_logs ADD CONSTRAINT audit_logs_signed
  CHECK (signature IS NOT NULL AND length(signature) = 64 AND key_id IS NOT NULL AND key_id <> '')
  NOT VALID;
