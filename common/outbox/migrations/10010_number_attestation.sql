-- Numbers an owner took and never committed (a rollback, a crashed process,
-- or the up to 32 numbers a sequence skips after a database crash or
-- failover) are attested by the owner itself: NumberAttestor
-- (common/outbox/number_attestor.h) lists them in a signed
-- `<owner>.outbox.numbers_voided` event once no transaction can still commit
-- them. `through`: every number up to it has been attested (present or
-- voided). A committed row is never voided, whatever its state, so an event
-- kept from Admin still shows as missing there.
CREATE TABLE outbox_numbers_attested (
  singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  through     bigint NOT NULL,
  attested_at timestamptz NOT NULL
);

-- The attestor reads the numbers of recent rows: rows arrive in number
-- order, so a BRIN index finds them at almost no cost to inserts.
CREATE INDEX audit_outbox_owner_sequence_brin ON audit_outbox USING brin (owner_sequence);
