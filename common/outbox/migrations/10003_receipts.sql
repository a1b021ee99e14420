-- Delivery confirmed by the consumer, not by the broker.
--
-- PUBLISHED now means "handed to Redis", which may still lose it (a restart
-- without AOF, a failover, FLUSHALL). Admin sends a receipt once its inbox
-- transaction committed; the owner then marks the row CONFIRMED. A row still
-- PUBLISHED after the resend timeout goes back to PENDING and is published
-- again (the inbox deduplicates).
ALTER TABLE audit_outbox DROP CONSTRAINT audit_outbox_state_check;
ALTER TABLE audit_outbox ADD CONSTRAINT audit_outbox_state_check
  CHECK (state IN ('PENDING', 'PUBLISHED', 'CONFIRMED', 'DEAD'));
ALTER TABLE audit_outbox ADD COLUMN confirmed_at timestamptz;
-- Times the row was published again for want of a receipt.
ALTER TABLE audit_outbox ADD COLUMN resends integer NOT NULL DEFAULT 0;

-- The resend sweep only scans rows awaiting a receipt.
CREATE INDEX audit_outbox_unconfirmed ON audit_outbox (published_at) WHERE state = 'PUBLISHED';
