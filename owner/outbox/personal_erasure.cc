#include "owner/outbox/personal_erasure.h"

#include <vector>

#include "common/audit/event.h"
#include "common/audit/personal.h"
#include "common/base/status_macros.h"

namespace ulticode::outbox {
namespace {

constexpr int64_t kPage = 200;

// Whether `entry` carries a value about `subject` of an event up to
// `through`: a value in its `personal` field whose commitment names the
// subject (an entry published again without it carries none).
bool Carries(const redis::StreamEntry& entry, const std::string& subject, absl::Time through) {
  const std::string* envelope = nullptr;
  const std::string* personal = nullptr;
  for (const auto& [name, value] : entry.fields) {
    if (name == audit::kEnvelopeField) envelope = &value;
    if (name == audit::kPersonalField) personal = &value;
  }
  audit::AuditEvent event;
  audit::PersonalValues values;
  if (envelope == nullptr || personal == nullptr || !event.ParseFromString(*envelope) ||
      !values.ParseFromString(*personal)) {
    return false;
  }
  const auto& ts = event.occurred_at();
  if (absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos()) > through) return false;
  for (const audit::PersonalValue& v : values.values()) {
    const audit::PersonalCommitment* c = audit::FindCommitment(event, v.path());
    if (c != nullptr && c->subject() == subject) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<int64_t> ScrubStream(redis::Client& redis, const std::string& stream,
                                    const std::string& subject, absl::Time through) {
  int64_t removed = 0;
  std::string after = "0-0";
  while (true) {
    ASSIGN_OR_RETURN(const std::vector<redis::StreamEntry> page,
                     redis.XRead(stream, kPage, absl::ZeroDuration(), after));
    if (page.empty()) return removed;
    std::vector<std::string> doomed = {"XDEL", stream};
    for (const redis::StreamEntry& e : page) {
      if (Carries(e, subject, through)) doomed.push_back(e.id);
    }
    after = page.back().id;
    if (doomed.size() > 2) {
      ASSIGN_OR_RETURN(const redis::Reply reply, redis.Command(doomed));
      removed += reply.integer();
    }
  }
}

}  // namespace ulticode::outbox
