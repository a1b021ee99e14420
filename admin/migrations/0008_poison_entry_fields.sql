-- A stream entry id can repeat: Redis restarted without its data, on a host
-- whose clock is behind, hands out ids it handed out before. A re-delivery
-- of the same entry has the same fields; another entry under a repeated id
-- has other fields. So a poison row is unique per entry id AND fields: a
-- re-delivery is stored once, and another entry is never dropped as one.
-- The digest is computed here (BEFORE INSERT), from the stored fields.
ALTER TABLE poison_events ADD COLUMN fields_sha256 bytea;
UPDATE poison_events SET fields_sha256 = sha256(convert_to(fields::text, 'UTF8'));
ALTER TABLE poison_events ALTER COLUMN fields_sha256 SET NOT NULL;

CREATE FUNCTION poison_events_fields_sha256() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  NEW.fields_sha256 := sha256(convert_to(NEW.fields::text, 'UTF8'));
  RETURN NEW;
END
$$;
CREATE TRIGGER poison_events_fields_sha256 BEFORE INSERT ON poison_events
  FOR EACH ROW EXECUTE FUNCTION poison_events_fields_sha256();

ALTER TABLE poison_events DROP CONSTRAINT poison_events_entry;
ALTER TABLE poison_events ADD CONSTRAINT poison_events_entry
  UNIQUE (consumer, stream, stream_entry_id, fields_sha256);
