#include "common/metrics/config_file_collector.h"

#include "common/config/file_health.h"

namespace ulticode::metrics {

std::vector<prometheus::MetricFamily> ConfigFileCollector::Collect() const {
  prometheus::MetricFamily stale{
      "ulticode_config_file_stale",
      "1 when a watched configuration file changed but does not load: its previous version "
      "(e.g. a key meant to be revoked) is still in use",
      prometheus::MetricType::Gauge,
      {}};
  prometheus::MetricFamily failures{"ulticode_config_reload_failures_total",
                                    "Changes of a watched configuration file that did not load",
                                    prometheus::MetricType::Counter,
                                    {}};
  for (const config::FileHealth& f : config::FileHealthSnapshot()) {
    prometheus::ClientMetric s;
    s.label = {{"file", f.path}};
    s.gauge.value = f.stale ? 1 : 0;
    stale.metric.push_back(s);
    prometheus::ClientMetric c;
    c.label = {{"file", f.path}};
    c.counter.value = static_cast<double>(f.failed_reloads);
    failures.metric.push_back(c);
  }
  return {stale, failures};
}

}  // namespace ulticode::metrics
