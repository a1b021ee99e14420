// Periodic jobs of a process: retention, gauge samplers, stream trimming.
// Each job runs every `interval` on its own thread, with its own PostgreSQL
// connection when it needs one (dialled on first use, again after it broke;
// a job without one, e.g. stream trimming, keeps running while PostgreSQL is
// down). Runs are counted (`ulticode_periodic_job_runs_total{task,outcome}`);
// a failed run is logged and the job runs again at its next interval; a job never stops the
// process. The first run starts at once. Stop() is prompt: it interrupts the wait, and a run in
// progress finishes its current statement.
#pragma once

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/pg/connection.h"
#include "common/worker/waker.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"

namespace ulticode::worker {

// True once the process is stopping: a long run checks it between batches.
using Stopping = std::function<bool()>;

struct PeriodicJob {
  std::string name;  // the `task` label, e.g. "outbox.retention"
  absl::Duration interval;
  // One run; `conn` is null for a job with `database` false; `stopping`
  // turns true when the process stops (a long run checks it between
  // batches). Returning an error logs it; the next run comes on schedule.
  std::function<absl::Status(pg::Connection* conn, const Stopping& stopping)> run;
  bool database = true;
};

class Periodic {
 public:
  Periodic(pg::ConnectOptions pg, std::vector<PeriodicJob> jobs, prometheus::Registry& registry);
  ~Periodic();

  void Start();
  void Stop();

 private:
  void Run(const PeriodicJob& job);

  const pg::ConnectOptions pg_;
  const std::vector<PeriodicJob> jobs_;
  Waker waker_;
  std::vector<std::thread> threads_;
  prometheus::Family<prometheus::Counter>* runs_;
};

}  // namespace ulticode::worker
