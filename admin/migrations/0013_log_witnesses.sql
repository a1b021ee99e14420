-- The owners as witnesses of the transparency log (docs/transparency-log.md):
-- per witness, the checkpoint it cosigned last and what Admin sent it; and
-- every cosignature (c2sp.org/tlog-cosignature, cosignature/v1),
-- kept like the checkpoints.
CREATE TABLE log_witnesses (
  witness       text PRIMARY KEY,
  -- The size of the checkpoint it cosigned last.
  cosigned_size bigint NOT NULL DEFAULT 0,
  -- Its events below this index have had their inclusion proofs sent with
  -- the latest checkpoint.
  proved_size   bigint NOT NULL DEFAULT 0,
  sent_at       timestamptz,
  -- The last entry of its cosignature stream read.
  cursor        text NOT NULL DEFAULT '0-0'
);

CREATE TABLE log_cosignatures (
  size        bigint NOT NULL,
  witness     text NOT NULL,
  line        text NOT NULL,
  cosigned_at timestamptz NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (size, witness)
);
