-- The bridge now inserts first deliveries PROCESSED together with their
-- audit_logs rows (one transaction); only rows it inserts PENDING (the
-- fallback when that transaction fails) are work for the lease consumers,
-- so only those wake them.
CREATE OR REPLACE FUNCTION consumer_inbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM new_rows WHERE status = 'PENDING') THEN
    PERFORM pg_notify('consumer_inbox', '');
  END IF;
  RETURN NULL;
END $$;
