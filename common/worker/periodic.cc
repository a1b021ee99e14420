#include "common/worker/periodic.h"

#include "common/log/log.h"
#include "common/worker/loop.h"

namespace ulticode::worker {

Periodic::Periodic(pg::ConnectOptions pg, std::vector<PeriodicJob> jobs,
                   prometheus::Registry& registry)
    : pg_(std::move(pg)), jobs_(std::move(jobs)) {
  runs_ = &prometheus::BuildCounter()
               .Name("ulticode_periodic_job_runs_total")
               .Help("Runs of periodic jobs (retention, samplers, trimming), by job and outcome")
               .Register(registry);
}

Periodic::~Periodic() { Stop(); }

void Periodic::Start() {
  waker_.Reset();
  for (const PeriodicJob& job : jobs_) threads_.emplace_back([this, &job] { Run(job); });
}

void Periodic::Stop() {
  waker_.Stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void Periodic::Run(const PeriodicJob& job) {
  prometheus::Counter& ok = runs_->Add({{"task", job.name}, {"outcome", "ok"}});
  prometheus::Counter& failed = runs_->Add({{"task", job.name}, {"outcome", "failed"}});
  Loop loop(waker_, pg_, backoff::Policy{job.interval, job.interval}, job.name);
  const Stopping stopping = [this] { return waker_.stopping(); };
  for (bool first = true; !waker_.stopping(); first = false) {
    if (!first) waker_.Sleep(job.interval);
    if (waker_.stopping()) break;
    pg::Connection* conn = nullptr;
    if (job.database) {
      conn = loop.Database();
      if (conn == nullptr) {
        failed.Increment();
        continue;
      }
    }
    if (absl::Status s = job.run(conn, stopping); !s.ok()) {
      failed.Increment();
      log::Warn(job.name, "periodic run failed; next run on schedule", {{"error", s.ToString()}});
      continue;
    }
    ok.Increment();
  }
}

}  // namespace ulticode::worker
