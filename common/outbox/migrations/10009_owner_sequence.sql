-- Every event an owner commits takes the next number of this sequence in its
-- business transaction (outbox::Append) and carries it, signed, in its
-- envelope (AuditEvent.owner_sequence). Admin alerts on numbers that never
-- arrive: an event committed and then kept from Admin (say marked CONFIRMED
-- by someone holding the runtime login) leaves a gap once later events
-- arrive. The runtime role may only take numbers (USAGE: nextval), never set
-- them, and the column is not in its UPDATE grant.
CREATE SEQUENCE audit_outbox_sequence;
ALTER TABLE audit_outbox ADD COLUMN owner_sequence bigint;
