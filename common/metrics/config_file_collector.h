// The watched configuration files' reload state (config/file_health.h), read
// at each scrape: ulticode_config_file_stale{file} (1: the file on disk does
// not load, its previous version is in use) and
// ulticode_config_reload_failures_total{file}.
#pragma once

#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace ulticode::metrics {

class ConfigFileCollector final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace ulticode::metrics
