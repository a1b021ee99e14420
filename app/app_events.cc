#include "app/app_events.h"

#include <cstdint>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/mutation/actor.h"
#include "google/protobuf/util/time_util.h"

namespace ulticode::app::events {
namespace {

using google::protobuf::util::TimeUtil;
using mutation::Values;

using mutation::Change;

audit::AuditEvent Build(const audit::Actor& actor, const Change& c) {
  return mutation::BuildEvent(audit::v1::OWNER_APP, actor, c);
}

// RFC 3339, as the proto Timestamp prints it.
std::string TimeString(absl::Time t) {
  return TimeUtil::ToString(TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(t)));
}

int64_t Bytes(const std::string& s) { return static_cast<int64_t>(s.size()); }

}  // namespace

audit::AuditEvent ProblemCreated(const audit::Actor& actor, const store::ProblemRow& problem) {
  return Build(
      actor,
      {.event_type = "app.problem.created",
       .action = "create_problem",
       .subject = problem.problem_id,
       .entity_type = "problem",
       .entity_id = problem.problem_id,
       .new_value = Values()
                        .Set("slug", problem.slug)
                        .Set("title", problem.title)
                        .Set("statement_bytes", Bytes(problem.statement))
                        .Set("time_limit_ms", static_cast<int64_t>(problem.time_limit_ms))
                        .Set("memory_limit_mb", static_cast<int64_t>(problem.memory_limit_mb))
                        .Set("difficulty", static_cast<int64_t>(problem.difficulty))
                        .Set("version", problem.version)});
}

audit::AuditEvent ProblemUpdated(const audit::Actor& actor, const std::string& problem_id,
                                 const store::ProblemRow& before,
                                 const store::ProblemChanges& changes) {
  Values old_values, new_values;
  if (changes.title) {
    old_values.Set("title", before.title);
    new_values.Set("title", *changes.title);
  }
  if (changes.statement) {
    // Sizes only, as at creation: two statements could make a 128 KiB event.
    old_values.Set("statement_bytes", Bytes(before.statement));
    new_values.Set("statement_bytes", Bytes(*changes.statement));
  }
  if (changes.time_limit_ms) {
    old_values.Set("time_limit_ms", static_cast<int64_t>(before.time_limit_ms));
    new_values.Set("time_limit_ms", static_cast<int64_t>(*changes.time_limit_ms));
  }
  if (changes.memory_limit_mb) {
    old_values.Set("memory_limit_mb", static_cast<int64_t>(before.memory_limit_mb));
    new_values.Set("memory_limit_mb", static_cast<int64_t>(*changes.memory_limit_mb));
  }
  if (changes.difficulty) {
    old_values.Set("difficulty", static_cast<int64_t>(before.difficulty));
    new_values.Set("difficulty", static_cast<int64_t>(*changes.difficulty));
  }
  return Build(actor, {.event_type = "app.problem.updated",
                       .action = "update_problem",
                       .subject = problem_id,
                       .entity_type = "problem",
                       .entity_id = problem_id,
                       .old_value = std::move(old_values),
                       .new_value = std::move(new_values)});
}

audit::AuditEvent ContestCreated(const audit::Actor& actor, const store::ContestRow& contest) {
  return Build(actor, {.event_type = "app.contest.created",
                       .action = "create_contest",
                       .subject = contest.contest_id,
                       .entity_type = "contest",
                       .entity_id = contest.contest_id,
                       .new_value = Values()
                                        .Set("slug", contest.slug)
                                        .Set("title", contest.title)
                                        .Set("starts_at", TimeString(contest.starts_at))
                                        .Set("ends_at", TimeString(contest.ends_at))
                                        .Set("status", contest.status)
                                        .Set("version", contest.version)});
}

audit::AuditEvent ContestProblemAdded(const audit::Actor& actor, const std::string& contest_id,
                                      const std::string& problem_id, const std::string& label) {
  return Build(actor, {.event_type = "app.contest.problem_added",
                       .action = "add_contest_problem",
                       .subject = contest_id,
                       .entity_type = "contest_problem",
                       .entity_id = absl::StrCat(contest_id, "/", problem_id),
                       .new_value = Values().Set("problem_id", problem_id).Set("label", label)});
}

audit::AuditEvent ContestProblemRemoved(const audit::Actor& actor, const std::string& contest_id,
                                        const std::string& problem_id, const std::string& label) {
  return Build(actor, {.event_type = "app.contest.problem_removed",
                       .action = "remove_contest_problem",
                       .subject = contest_id,
                       .entity_type = "contest_problem",
                       .entity_id = absl::StrCat(contest_id, "/", problem_id),
                       .old_value = Values().Set("problem_id", problem_id).Set("label", label)});
}

audit::AuditEvent ContestPublished(const audit::Actor& actor, const std::string& contest_id,
                                   const store::ContestRow& before) {
  return Build(actor, {.event_type = "app.contest.published",
                       .action = "publish_contest",
                       .subject = contest_id,
                       .entity_type = "contest",
                       .entity_id = contest_id,
                       .old_value = Values().Set("status", before.status),
                       .new_value = Values().Set("status", "PUBLISHED")});
}

}  // namespace ulticode::app::events
