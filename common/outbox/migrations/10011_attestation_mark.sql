-- The attestation mark only moves forward, and its time is the database's.
-- Moved back, the attestor would attest again numbers whose rows retention
-- has deleted since, and so void a suppressed event Admin already reported.
CREATE FUNCTION outbox_numbers_attested_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.through < OLD.through THEN
    RAISE EXCEPTION 'outbox_numbers_attested: the mark only moves forward (% -> %)',
      OLD.through, NEW.through USING ERRCODE = 'check_violation';
  END IF;
  NEW.attested_at := now();
  RETURN NEW;
END $$;
CREATE TRIGGER outbox_numbers_attested_forward BEFORE UPDATE ON outbox_numbers_attested
  FOR EACH ROW EXECUTE FUNCTION outbox_numbers_attested_forward();
