#include "common/metrics/metrics.h"

#include <exception>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/metrics/config_file_collector.h"
#include "common/metrics/process_collector.h"
#include "prometheus/gauge.h"

namespace ulticode::metrics {
namespace {

void RegisterBuildInfo(prometheus::Registry& registry, const std::string& service) {
  prometheus::BuildGauge()
      .Name("ulticode_build_info")
      .Help("Always 1; labels describe the running service")
      .Register(registry)
      .Add({{"service", service}, {"version", "0.1.0"}})
      .Set(1);
}

}  // namespace

Metrics::Metrics(std::shared_ptr<prometheus::Registry> registry) : registry_(std::move(registry)) {}

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Start(const std::string& listen,
                                                        const std::string& service) {
  auto metrics = std::unique_ptr<Metrics>(new Metrics(std::make_shared<prometheus::Registry>()));
  RegisterBuildInfo(*metrics->registry_, service);
  try {
    metrics->exposer_ = std::make_unique<prometheus::Exposer>(listen, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", listen, ": ", e.what()));
  }
  metrics->exposer_->RegisterCollectable(metrics->registry_);
  metrics->process_ = std::make_shared<ProcessCollector>();
  metrics->exposer_->RegisterCollectable(metrics->process_);
  metrics->config_files_ = std::make_shared<ConfigFileCollector>();
  metrics->exposer_->RegisterCollectable(metrics->config_files_);
  return metrics;
}

std::unique_ptr<Metrics> Metrics::Unexposed(const std::string& service) {
  auto metrics = std::unique_ptr<Metrics>(new Metrics(std::make_shared<prometheus::Registry>()));
  RegisterBuildInfo(*metrics->registry_, service);
  return metrics;
}

prometheus::Counter& Counter(prometheus::Registry& registry, const std::string& name,
                             const std::string& help, const prometheus::Labels& labels) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add(labels);
}

const std::vector<double>& LatencyBuckets() {
  static const auto* kBuckets = new std::vector<double>{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  return *kBuckets;
}

}  // namespace ulticode::metrics
