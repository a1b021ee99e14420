-- Receipts become proofs (docs/transparency-log.md, "Witnesses"): an owner
-- confirms an outbox row only on proof that its event is in the log, sent
-- with the checkpoint that covers it. An event delivered again has not been
-- confirmed by its owner: the bridge asks for its proof to be sent again.
CREATE TABLE log_proof_requests (
  event_id     uuid PRIMARY KEY,
  owner        text NOT NULL,
  requested_at timestamptz NOT NULL DEFAULT now()
);
