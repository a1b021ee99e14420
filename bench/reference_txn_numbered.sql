-- reference_txn.sql plus what event numbering adds to an owner's business
-- transaction: one nextval round trip (outbox::Append).
\set n random(1, 1000000000000)
BEGIN;
INSERT INTO users (user_id, username, email, display_name, status)
  VALUES (gen_random_uuid(), 'r' || :n || '_' || :client_id, 'r' || :n || '_' || :client_id || '@x.io', 'R', 'ACTIVE');
SELECT nextval('audit_outbox_sequence');
INSERT INTO audit_outbox (event_id, event_type, payload, mac, key_id)
  VALUES (gen_random_uuid(), 'auth.user.created', decode(repeat('ab', 400), 'hex'), decode(repeat('cd', 32), 'hex'), 'k');
INSERT INTO idempotency_keys (principal, request_id, method, request_sha256, response)
  VALUES ('bench', 'r' || :n || '_' || :client_id, 'CreateUser', decode(repeat('ef', 32), 'hex'), decode(repeat('01', 120), 'hex'));
COMMIT;
