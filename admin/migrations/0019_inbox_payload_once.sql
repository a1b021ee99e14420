-- Each payload once: a row the bridge wrote together with its audit_logs
-- row (PROCESSED at once) keeps only the SHA-256 of its envelope, which is
-- all a re-delivery is compared with; the envelope and its signature live
-- in audit_logs. A row the lease consumer must still write (PENDING, and
-- so PROCESSING and DEAD) keeps both.
ALTER TABLE consumer_inbox ALTER COLUMN payload DROP NOT NULL;
ALTER TABLE consumer_inbox ADD CONSTRAINT consumer_inbox_payload_kept
  CHECK (status = 'PROCESSED' OR payload IS NOT NULL);
