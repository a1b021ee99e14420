// The sequencer of Admin's transparency log (docs/transparency-log.md). Each
// run, under an advisory lock (one sequencer at a time, whichever replica):
// takes up to `batch` audit rows waiting in log_queue, in the order they
// were inserted; gives them the next indexes (log_leaves); stores the leaf
// and subtree hashes (log_nodes); and, when a signer is set and the last
// checkpoint is at least `checkpoint_interval` old, signs a checkpoint of
// the new size (log_checkpoints) — all in one transaction. The inbox path
// never waits for it.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/pg/connection.h"
#include "common/tlog/note.h"

namespace ulticode::admin::transparency {

struct SequencerOptions {
  std::string origin;                        // the checkpoints' first line
  const tlog::NoteSigner* signer = nullptr;  // null: no checkpoints
  int batch = 1000;
  absl::Duration checkpoint_interval = absl::Milliseconds(500);
};

struct SequencerRun {
  bool locked = false;        // this run held the sequencer's lock
  int64_t taken = 0;          // rows taken from the queue (sequenced or dropped)
  int64_t sequenced = 0;      // rows given an index
  int64_t size = 0;           // the tree's size after the run
  bool checkpointed = false;  // a checkpoint of `size` was signed
};

class Sequencer {
 public:
  explicit Sequencer(SequencerOptions options) : options_(std::move(options)) {}
  absl::StatusOr<SequencerRun> RunOnce(pg::Connection& conn);

 private:
  const SequencerOptions options_;
};

}  // namespace ulticode::admin::transparency
