-- The owners number their events (AuditEvent.owner_sequence, signed in the
-- envelope). audit_logs keeps each row's number; SequenceWatch
-- (admin/maintenance/sequence_watch.h) reports the numbers that never
-- arrive, as gap ranges here. Admin's own records have none (NULL).
ALTER TABLE audit_logs ADD COLUMN owner_sequence bigint;
CREATE INDEX audit_logs_owner_sequence ON audit_logs (owner, owner_sequence)
  WHERE owner_sequence IS NOT NULL;

-- Per owner: every number up to `through` has been examined; `horizon` is
-- the highest number seen at `horizon_at`, examined once the grace passed.
CREATE TABLE owner_sequence_checked (
  owner      text PRIMARY KEY,
  through    bigint NOT NULL,
  horizon    bigint NOT NULL,
  horizon_at timestamptz NOT NULL
);

-- Numbers that had not arrived a grace period after higher ones had: one
-- row per run of missing numbers. Resolved (never deleted) when all of them
-- arrive after all.
CREATE TABLE owner_sequence_gaps (
  owner         text NOT NULL,
  first_missing bigint NOT NULL,
  last_missing  bigint NOT NULL,
  found_at      timestamptz NOT NULL DEFAULT now(),
  resolved_at   timestamptz,
  PRIMARY KEY (owner, first_missing)
);
