-- Signed events: the owner signs the exact payload bytes with its Ed25519
-- key in the business transaction; the signature and the key id travel with
-- the row to the stream, so Admin can verify the owner wrote it.
-- Rows appended before this migration have none (Admin refuses them: they
-- go to its poison store as missing_signature and need an operator).
ALTER TABLE audit_outbox ADD COLUMN signature bytea;
ALTER TABLE audit_outbox ADD COLUMN key_id text;

-- Idempotency keys keep the SHA-256 of the canonical request (unknown fields
-- dropped, deterministic serialization), not the request bytes.
ALTER TABLE idempotency_keys ADD COLUMN request_sha256 bytea;
UPDATE idempotency_keys SET request_sha256 = sha256(request);
ALTER TABLE idempotency_keys ALTER COLUMN request_sha256 SET NOT NULL;
ALTER TABLE idempotency_keys DROP COLUMN request;
