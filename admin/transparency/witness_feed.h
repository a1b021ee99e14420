// Admin's side of the owners witnessing the log (common/tlog/witnessing.h):
// each run, under an advisory lock (one replica at a time),
//  - collects the cosignatures the owners sent since the last run (and
//    trims what it read from their streams), keeps those that verify with
//    the owner's key from the key directory (log_cosignatures) and records
//    the size the owner cosigned last (its latest answer by the time it
//    signed: an owner restored from a backup is fed from there; an old line
//    written again is counted "stale" and changes nothing);
//  - hands the latest checkpoint, with a consistency proof from the
//    owner's cosigned size and the inclusion proofs of the owner's events
//    it newly covers (at most 2048 a run, and at most half the proof
//    stream's share in bytes, so that the send before can still be unread
//    beside it; the next run goes on where this one stopped, with the same
//    checkpoint even if a newer one was signed meanwhile), to every owner
//    that has not cosigned it; again, with every proof since the cosigned
//    size, every `resend` until the owner cosigns it. Where each owner
//    stands (cosigned, proved, the checkpoint of a send cut short, the last
//    cosignature read) is kept in log_witnesses;
//  - sends again, with the latest checkpoint, the proofs of the events the
//    bridge saw delivered again (log_proof_requests): their owner has not
//    confirmed them.
// An owner is a witness named as its party ("auth", "app"), with its own
// Ed25519 key as a cosignature/v1 key.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/crypto/key_directory.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"

namespace ulticode::admin::transparency {

struct WitnessFeedOptions {
  // Witness (owner party name) -> its audit stream.
  std::vector<std::pair<std::string, std::string>> owners;
  redis::Options redis;
  const crypto::KeyDirectoryFile* keys = nullptr;
  absl::Duration resend = absl::Seconds(5);
  // Each proof stream's share of Redis's memory: one send holds at most
  // half of it, and after each send the stream keeps as many entries of
  // that send's mean size as fit (XTRIM MAXLEN ~; the stream guard holds it
  // to its bytes besides).
  int64_t proof_stream_bytes = int64_t{64} << 20;
};

class WitnessFeed {
 public:
  WitnessFeed(WitnessFeedOptions options, prometheus::Registry& registry);
  absl::Status RunOnce(pg::Connection& conn);

 private:
  absl::Status Collect(pg::Connection& conn, const std::string& witness, const std::string& stream);
  absl::Status Feed(pg::Connection& conn, const std::string& witness, const std::string& stream);

  const WitnessFeedOptions options_;
  redis::Client redis_;
  prometheus::Family<prometheus::Counter>& sent_;
  prometheus::Family<prometheus::Counter>& cosignatures_;
};

}  // namespace ulticode::admin::transparency
