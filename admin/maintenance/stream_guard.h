// Holds every stream a peer can write, and Admin's proof streams, to its
// share of Redis's memory.
//
// Redis has one `maxmemory` for everyone: with `noeviction` a full Redis
// refuses every XADD, the honest owners' and Admin's checkpoints alike. An owner's Redis login may
// write its audit stream and its cosignature stream as fast and as large as Redis takes; nothing in
// Redis bounds one user's keys. So Admin, which trims both, measures them every
// `--stream-guard-interval` (MEMORY USAGE over every node) and, when one is over
// its share (`--owner-stream-max-bytes`; the cosignature stream 1 MiB; the
// proof stream `--proof-stream-max-bytes`), removes its oldest entries down
// to 90 % of the share (an owner that misses a checkpoint and its proofs
// re-sends what stays unproved, and Admin proves it again). An honest owner
// loses nothing: it keeps every row until Admin proves it is in the log and
// publishes what was removed again; a flooding one is refused past its share
// and counted (ulticode_stream_over_share_total, alert
// UlticodeStreamOverShare). Between two runs a writer can add what the
// network carries in one interval: size Redis's headroom for it
// (docs/operating.md, "Redis memory, from the flags").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/audit/event.h"
#include "common/redis/redis_client.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"

namespace ulticode::admin::maintenance {

inline constexpr int64_t kCosignatureStreamBytes = int64_t{1} << 20;

class StreamGuard {
 public:
  // `streams`: the owner audit streams; each one's cosignature and proof
  // streams are guarded too.
  StreamGuard(const std::vector<std::pair<audit::Owner, std::string>>& streams,
              int64_t owner_stream_bytes, int64_t proof_stream_bytes, redis::Options redis,
              prometheus::Registry& registry);
  absl::Status RunOnce();

 private:
  struct Guarded {
    std::string key;
    int64_t share = 0;
  };
  absl::Status Hold(const Guarded& stream);

  std::vector<Guarded> guarded_;
  redis::Client redis_;
  prometheus::Family<prometheus::Counter>* over_;
  prometheus::Family<prometheus::Counter>* removed_;
};

}  // namespace ulticode::admin::maintenance
