// audit_logs rows as Admin writes them, for tests of its read side: the real
// writer (columns derived from a sealed envelope) and the real sequencer
// (leaves and stored hashes), so that what the reads check is what they
// would meet in production.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "admin/audit_logs/writer.h"
#include "admin/transparency/sequencer.h"
#include "common/audit/event.h"
#include "common/seal/seal.h"
#include "gtest/gtest.h"
#include "tests/support/keys.h"

namespace ulticode::testing {

// Inserts one audit_logs row per event, in one transaction, the events of
// each owner sealed as one bundle with its key of SharedTestKeys().
inline void WriteAuditRows(pg::Connection& conn, const std::vector<audit::AuditEvent>& events) {
  std::vector<std::string> envelopes(events.size()), seals(events.size()), key_ids(events.size());
  std::map<std::string, std::vector<size_t>> by_owner;
  for (size_t i = 0; i < events.size(); ++i) {
    envelopes[i] = audit::Serialize(events[i]);
    by_owner[audit::OwnerName(events[i].owner())].push_back(i);
  }
  for (const auto& [owner, indexes] : by_owner) {
    const crypto::SigningKey& key = SharedTestKeys().owner(owner);
    std::vector<absl::string_view> bundle;
    for (size_t i : indexes) bundle.push_back(envelopes[i]);
    const std::vector<std::string> sealed = seal::SealBundle(key, bundle).value();
    for (size_t j = 0; j < indexes.size(); ++j) {
      seals[indexes[j]] = sealed[j];
      key_ids[indexes[j]] = key.key_id();
    }
  }
  std::vector<admin::audit_logs::AuditLogInput> inputs;
  for (size_t i = 0; i < events.size(); ++i) {
    inputs.push_back({&events[i], &envelopes[i], &seals[i], &key_ids[i]});
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
