-- The owner as a witness of Admin's transparency log
-- (docs/transparency-log.md, "Witnesses"): the newest checkpoint of each
-- log it accepted. A checkpoint that does not extend it is refused.
CREATE TABLE log_witnessed (
  origin      text PRIMARY KEY,
  size        bigint NOT NULL,
  root        bytea NOT NULL CHECK (length(root) = 32),
  note        text NOT NULL,
  -- The receipt stream entry it last came in: an entry up to this one was
  -- seen before (a restarted reader, another replica behind) and is not a
  -- rollback.
  entry_id    text NOT NULL DEFAULT '',
  accepted_at timestamptz NOT NULL DEFAULT now()
);
