-- Signed events: every entry carries the owner's Ed25519 signature over the
-- exact envelope bytes and the id of the key that made it. The inbox keeps
-- them for the writer, and audit_logs keeps them beside the envelope, so any
-- row can be re-verified later by someone holding only the owner's public key.
ALTER TABLE consumer_inbox ADD COLUMN signature bytea;
ALTER TABLE consumer_inbox ADD COLUMN key_id text;
ALTER TABLE audit_logs ADD COLUMN signature bytea;
ALTER TABLE audit_logs ADD COLUMN key_id text;
