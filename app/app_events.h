// The audit event of each change App makes: one builder per change, from
// the typed rows and inputs of the change. Each builder fills the envelope
// (audit::NewEvent, occurred now) and the whole record: action, subject,
// entity and the old/new values. Ids given as strings are the request's
// (accepted in either case); ids of new rows come from the row.
#pragma once

#include <string>

#include "app/app_store.h"
#include "common/audit/event.h"

namespace ulticode::app::events {

// app.problem.created: the new problem's fields; the statement by size only
// (it can be 64 KiB).
audit::AuditEvent ProblemCreated(const audit::Actor& actor, const store::ProblemRow& problem);

// app.problem.updated: old and new values of exactly the fields in
// `changes` (the statement by size only).
audit::AuditEvent ProblemUpdated(const audit::Actor& actor, const std::string& problem_id,
                                 const store::ProblemRow& before,
                                 const store::ProblemChanges& changes);

// app.contest.created: the new contest's fields, times in RFC 3339.
audit::AuditEvent ContestCreated(const audit::Actor& actor, const store::ContestRow& contest);

// app.contest.problem_added / app.contest.problem_removed: the entity is
// "<contest_id>/<problem_id>", the value the problem and its label.
audit::AuditEvent ContestProblemAdded(const audit::Actor& actor, const std::string& contest_id,
                                      const std::string& problem_id, const std::string& label);
audit::AuditEvent ContestProblemRemoved(const audit::Actor& actor, const std::string& contest_id,
                                        const std::string& problem_id, const std::string& label);

// app.contest.published: the status before and after.
audit::AuditEvent ContestPublished(const audit::Actor& actor, const std::string& contest_id,
                                   const store::ContestRow& before);

}  // namespace ulticode::app::events
