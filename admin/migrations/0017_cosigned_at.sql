-- When the witness made the cosignature Admin last took as its answer. A
-- cosignature made before it (an old line written to the cosignature stream
-- again) no longer lowers what Admin believes the witness cosigned: only a
-- newer answer moves cosigned_size, up or down (a witness restored from a
-- backup answers anew, with a newer time).
ALTER TABLE log_witnesses ADD COLUMN cosigned_at timestamptz;

UPDATE log_witnesses w SET cosigned_at = c.cosigned_at
  FROM log_cosignatures c WHERE c.witness = w.witness AND c.size = w.cosigned_size;
