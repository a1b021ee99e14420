// audit_logs rows as Admin writes them, for tests of its read side: the real
// writer (columns derived from a signed envelope) and the real sequencer
// (leaves and stored hashes), so that what the reads check is what they
// would meet in production.
#pragma once

#include <string>
#include <vector>

#include "admin/audit_logs/writer.h"
#include "admin/transparency/sequencer.h"
#include "common/audit/event.h"
#include "gtest/gtest.h"
#include "tests/support/keys.h"

namespace ulticode::testing {

// Inserts one audit_logs row per event, in one transaction, each envelope
// signed with its owner's key of SharedTestKeys().
inline void WriteAuditRows(pg::Connection& conn, const std::vector<audit::AuditEvent>& events) {
  std::vector<std::string> envelopes, signatures, key_ids;
  envelopes.reserve(events.size());
  signatures.reserve(events.size());
  key_ids.reserve(events.size());
  std::vector<admin::audit_logs::AuditLogInput> inputs;
  for (const audit::AuditEvent& e : events) {
    const crypto::SigningKey& key = SharedTestKeys().owner(audit::OwnerName(e.owner()));
    envelopes.push_back(audit::Serialize(e));
    signatures.push_back(key.Sign(envelopes.back()).value());
    key_ids.push_back(key.key_id());
  }
  for (size_t i = 0; i < events.size(); ++i) {
    inputs.push_back({&events[i], &envelopes[i], &signatures[i], &key_ids[i]});
  }
  auto tx = conn.Begin();
  ASSERT_TRUE(tx.ok()) << tx.status();
  auto written = admin::audit_logs::InsertAuditLogs(*tx, inputs);
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_TRUE(tx->Commit().ok());
}

// Sequences every queued row with the real sequencer (checkpoints signed by
// `signer` if given). Returns the log's size.
inline int64_t SequenceAll(pg::Connection& conn, const tlog::NoteSigner* signer = nullptr) {
  admin::transparency::Sequencer sequencer(
      {"ulticode.test/audit", signer, 1000, absl::ZeroDuration()});
  for (;;) {
    auto run = sequencer.RunOnce(conn);
    EXPECT_TRUE(run.ok()) << run.status();
    if (!run.ok() || run->taken == 0) return run.ok() ? run->size : -1;
  }
}

}  // namespace ulticode::testing
