-- Receipts are bound to a publication.
--
-- Every attempt to publish a row takes the next publication number
-- (publication + 1, carried in the stream entry's `publication` field and
-- echoed in Admin's signed receipt). A receipt confirms a row only for a
-- publication in (receipts_after, publication]: one the row committed an
-- attempt for, and made since the row was last replayed or redriven. Replay
-- and redrive set receipts_after past every number an earlier attempt can
-- have used, so an old receipt (a reader behind, or one re-posted by anyone
-- who can write the receipt stream) never confirms the new publication.
ALTER TABLE audit_outbox ADD COLUMN publication bigint NOT NULL DEFAULT 0;
ALTER TABLE audit_outbox ADD COLUMN receipts_after bigint NOT NULL DEFAULT 0;
