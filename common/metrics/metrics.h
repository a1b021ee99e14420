// The process's Prometheus registry and its HTTP exposer (/metrics).
//
// Names follow Prometheus conventions: prefix `ulticode_`, base units
// (`_seconds`, `_bytes`), counters end in `_total`, labels only of bounded
// cardinality. Thread-safe (prometheus-cpp metrics are).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"

namespace ulticode::metrics {

class Metrics {
 public:
  // Starts serving /metrics on `listen` ("host:port"); fails with a clear
  // error when the address cannot be bound. `service` labels build_info.
  static absl::StatusOr<std::unique_ptr<Metrics>> Start(const std::string& listen,
                                                        const std::string& service);
  // A registry that is not exposed over HTTP (tests, tools).
  static std::unique_ptr<Metrics> Unexposed(const std::string& service);

  prometheus::Registry& registry() { return *registry_; }

 private:
  explicit Metrics(std::shared_ptr<prometheus::Registry> registry);
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  // The exposer holds collectables weakly: this keeps the process metrics.
  std::shared_ptr<prometheus::Collectable> process_;
  std::shared_ptr<prometheus::Collectable> config_files_;
};

// Registers (or finds) counter family `name` and returns its child with
// `labels`: the one-liner every component uses for its counters.
prometheus::Counter& Counter(prometheus::Registry& registry, const std::string& name,
                             const std::string& help, const prometheus::Labels& labels = {});

// Latency buckets in seconds, from 0.5 ms to 10 s.
const std::vector<double>& LatencyBuckets();

}  // namespace ulticode::metrics
