-- Operators resolve poison entries (AdminOperations.DiscardPoison and
-- ReplayPoison, issue 12) without deleting them: the entry stays as evidence
-- until --poison-retention, marked with when and how it was resolved.
ALTER TABLE poison_events ADD COLUMN resolved_at timestamptz;
ALTER TABLE poison_events ADD COLUMN resolution text
  CHECK (resolution IN ('discarded', 'replayed'));
CREATE INDEX poison_events_unresolved ON poison_events (id) WHERE resolved_at IS NULL;
