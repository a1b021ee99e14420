// Reading a registry's metrics in tests, as Prometheus would scrape them.
#pragma once

#include <string>

#include "absl/strings/numbers.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace ulticode::testing {

// The registry in the text exposition format.
inline std::string MetricText(prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

// The value of the series that starts with `series` ("name{labels}") in
// `text`, or -1.
inline double MetricValue(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  const size_t start = at + series.size() + 2;
  double v = -1;
  if (!absl::SimpleAtod(text.substr(start, text.find('\n', start) - start), &v)) return -1;
  return v;
}

}  // namespace ulticode::testing
