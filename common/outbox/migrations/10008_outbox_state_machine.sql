-- What the owner's runtime login may do to an outbox row it did not just
-- write. The event itself (event_id, event_type, payload, signature, key_id,
-- created_at) is not in the runtime role's UPDATE grant (outbox_store.cc,
-- RuntimeGrants), so it cannot be rewritten. This trigger keeps the delivery
-- columns honest:
--   * a row becomes PUBLISHED only from PENDING;
--   * it becomes CONFIRMED only from PENDING or PUBLISHED, and only after a
--     publication since it was last replayed (publication > receipts_after);
--   * publication numbers only grow;
--   * published_at and confirmed_at are the database's clock at the moment
--     of that transition, whatever the statement says, and never change
--     otherwise, so a confirmation cannot be back-dated into retention.
-- Any state may go back to PENDING (re-send, replay, redrive) or to DEAD
-- (both are loud: alerted and never deleted).
CREATE FUNCTION audit_outbox_state_machine() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.publication < OLD.publication OR NEW.receipts_after < OLD.receipts_after THEN
    RAISE EXCEPTION 'audit_outbox %: publication numbers only grow', OLD.event_id
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.state = 'PUBLISHED' AND OLD.state NOT IN ('PENDING', 'PUBLISHED') THEN
    RAISE EXCEPTION 'audit_outbox %: % -> PUBLISHED is not a transition', OLD.event_id, OLD.state
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.state = 'CONFIRMED' AND OLD.state <> 'CONFIRMED' THEN
    IF OLD.state NOT IN ('PENDING', 'PUBLISHED') OR NEW.publication <= NEW.receipts_after THEN
      RAISE EXCEPTION 'audit_outbox %: % -> CONFIRMED without a publication since its last replay',
        OLD.event_id, OLD.state USING ERRCODE = 'check_violation';
    END IF;
    NEW.confirmed_at := now();
  ELSE
    NEW.confirmed_at := OLD.confirmed_at;
  END IF;
  IF NEW.state = 'PUBLISHED' AND OLD.state <> 'PUBLISHED' THEN
    NEW.published_at := now();
  ELSE
    NEW.published_at := OLD.published_at;
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER audit_outbox_state_machine BEFORE UPDATE ON audit_outbox
  FOR EACH ROW EXECUTE FUNCTION audit_outbox_state_machine();

-- Retention never deletes a row confirmed less than an hour ago, whatever
-- the caller asks: an hour is the longest a PUBLISHED row waits before it is
-- re-sent (outbox_store.cc, kRequeue), so a row is kept at least as long as
-- it could still have been re-sent had it not been confirmed.
CREATE OR REPLACE FUNCTION outbox_retention(keep_seconds float8, max_rows integer) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  WITH doomed AS (
    DELETE FROM audit_outbox
    WHERE state = 'CONFIRMED'
      AND confirmed_at < now() - greatest(keep_seconds, 3600) * interval '1 second'
      AND event_id IN (
        SELECT event_id FROM audit_outbox
        WHERE created_at < now() - greatest(keep_seconds, 3600) * interval '1 second'
          AND state = 'CONFIRMED'
          AND confirmed_at < now() - greatest(keep_seconds, 3600) * interval '1 second'
        LIMIT least(max_rows, 10000))
    RETURNING 1)
  SELECT count(*) FROM doomed
$$;
