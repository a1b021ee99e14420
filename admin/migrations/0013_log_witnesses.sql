-- The owners as witnesses of the transparency log (docs/transparency-log.md):
-- per witness, the largest checkpoint it cosigned and what Admin last sent
-- it; and every cosignature (c2sp.org/tlog-cosignature, cosignature/v1),
-- kept like the checkpoints.
CREATE TABLE log_witnesses (
  witness       text PRIMARY KEY,
  cosigned_size bigint NOT NULL DEFAULT 0,
  sent_size     bigint NOT NULL DEFAULT 0,
  sent_at       timestamptz
);

CREATE TABLE log_cosignatures (
  size        bigint NOT NULL,
  witness     text NOT NULL,
  line        text NOT NULL,
  cosigned_at timestamptz NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (size, witness)
);
