-- Only the sequencer gives a row its index: a row is inserted without one
-- (a preset index would leave the indexes below it without stored nodes).
CREATE FUNCTION audit_logs_index_unset() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.log_index IS NOT NULL THEN
    RAISE EXCEPTION 'audit_logs %: a row is inserted without a log index', NEW.event_id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER audit_logs_index_unset BEFORE INSERT ON audit_logs
  FOR EACH ROW EXECUTE FUNCTION audit_logs_index_unset();
