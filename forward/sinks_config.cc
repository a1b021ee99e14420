#include "forward/sinks_config.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "forward/syslog.h"
#include "forward/webhook.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "tools/client/admin_channel.h"

namespace ulticode::forward {
namespace {

namespace v1 = ::ulticode::forward::v1;

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

absl::Status Named(const std::string& sink, const absl::Status& s) {
  return absl::InvalidArgumentError(absl::StrCat("sink \"", sink, "\": ", s.message()));
}

absl::StatusOr<SinkPlan> PlanOf(const v1::Sink& sink) {
  SinkPlan plan;
  plan.name = sink.name();
  plan.filter = sink.filter();
  if (!plan.filter.entity_id().empty() && plan.filter.entity_type().empty()) {
    return absl::InvalidArgumentError("filter.entity_id: requires filter.entity_type");
  }
  switch (sink.destination_case()) {
    case v1::Sink::kWebhook: {
      const v1::Webhook& w = sink.webhook();
      if (w.max_batch_rows() < 0 || w.max_batch_bytes() < 0) {
        return absl::InvalidArgumentError("webhook.max_batch_rows/max_batch_bytes: negative");
      }
      if (w.max_batch_rows() > 0) plan.max_batch_rows = static_cast<size_t>(w.max_batch_rows());
      if (w.max_batch_bytes() > 0) plan.max_batch_bytes = static_cast<size_t>(w.max_batch_bytes());
      if (w.schema() == v1::Webhook::SCHEMA_OCSF) plan.schema = exports::Format::kOcsf;
      WebhookOptions o;
      o.url = w.url();
      o.secret_file = w.secret_file();
      o.ca_file = w.ca_file();
      if (w.has_timeout()) {
        o.timeout = absl::Milliseconds(
            google::protobuf::util::TimeUtil::DurationToMilliseconds(w.timeout()));
        if (o.timeout <= absl::ZeroDuration()) {
          return absl::InvalidArgumentError("webhook.timeout: must be positive");
        }
      }
      ASSIGN_OR_RETURN(plan.destination, Webhook::Create(std::move(o)));
      return plan;
    }
    case v1::Sink::kSyslog: {
      const v1::Syslog& s = sink.syslog();
      if (s.max_batch_rows() < 0) {
        return absl::InvalidArgumentError("syslog.max_batch_rows: negative");
      }
      if (s.max_batch_rows() > 0) plan.max_batch_rows = static_cast<size_t>(s.max_batch_rows());
      SyslogOptions o;
      o.address = s.address();
      o.tls = s.tls();
      o.ca_file = s.ca_file();
      o.hostname = s.hostname();
      ASSIGN_OR_RETURN(plan.destination, Syslog::Create(std::move(o)));
      return plan;
    }
    default:
      return absl::InvalidArgumentError("needs a destination: webhook or syslog");
  }
}

}  // namespace

absl::StatusOr<std::vector<SinkPlan>> SinksOf(const std::string& json) {
  v1::ForwarderConfig config;
  if (auto s = google::protobuf::util::JsonStringToMessage(json, &config); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a ForwarderConfig: ", s.message().ToString()));
  }
  if (config.sinks().empty()) return absl::InvalidArgumentError("no sinks");
  std::vector<SinkPlan> plans;
  std::set<std::string> names;
  for (const v1::Sink& sink : config.sinks()) {
    if (!ValidName(sink.name())) {
      return absl::InvalidArgumentError(
          absl::StrCat("sink name \"", sink.name().substr(0, 64), "\": 1..63 of a-z, 0-9 and -"));
    }
    if (!names.insert(sink.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("sink \"", sink.name(), "\": named twice"));
    }
    auto plan = PlanOf(sink);
    if (!plan.ok()) return Named(sink.name(), plan.status());
    plans.push_back(*std::move(plan));
  }
  return plans;
}

absl::StatusOr<std::vector<SinkPlan>> LoadSinks(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string json, client::ReadFile(path));
  auto plans = SinksOf(json);
  if (!plans.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sinks-file ", path, ": ", plans.status().message()));
  }
  return plans;
}

}  // namespace ulticode::forward
