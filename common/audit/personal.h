// Personal data under the immutable log (docs/personal-data.md).
//
// Which values are personal is part of the contract: the AuditRecord fields
// marked `(ulticode.audit.v1.personal_data) = true` and, per event type, the
// keys of its old/new values listed in event.cc (EventTypeContract). An
// owner builds an event with its values in it (schema_version 1), then
// CommitPersonalData moves every personal value out: the envelope keeps,
// for each, a commitment (record.personal) and becomes schema_version 2;
// the value travels beside it with a fresh 32-byte salt (PersonalValues)
// and is stored apart from it, keyed by its data subject, so that it can be
// erased while the envelope, its seal and every proof over it stay as they
// are. A commitment reveals nothing without its salt.
//
//   commitment = SHA-256("ulticode/personal-value/v1" || f(event_id) ||
//                        f(path) || f(subject) || f(salt) || f(value))
//   f(x) = 4-byte big-endian length of x, then x
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ulticode/audit/v1/audit.pb.h"

namespace ulticode::audit {

using ::ulticode::audit::v1::AuditEvent;
using ::ulticode::audit::v1::AuditRecord;
using ::ulticode::audit::v1::PersonalCommitment;
using ::ulticode::audit::v1::PersonalValue;
using ::ulticode::audit::v1::PersonalValues;

inline constexpr size_t kPersonalSaltBytes = 32;
inline constexpr char kPersonalCommitmentDomain[] = "ulticode/personal-value/v1";

// The AuditRecord fields marked personal, by name ("client_ip", ...).
const std::vector<std::string>& PersonalRecordFields();

// The personal paths an event of `event_type` (of `owner`) may have: the
// personal record fields, then "old_value.<key>" and "new_value.<key>" for
// each personal key of the type.
std::vector<std::string> PersonalPaths(const AuditEvent& event);

// A data subject as commitments name it (a principal id): 1..256
// characters, no invisible or bidi characters. INVALID_ARGUMENT naming
// `field` otherwise.
absl::Status ValidateSubject(absl::string_view field, absl::string_view subject);

std::string Commitment(absl::string_view event_id, absl::string_view path,
                       absl::string_view subject, absl::string_view salt, absl::string_view value);

// Moves the personal values out of a schema_version 1 `event` (as built):
// each non-empty one leaves a commitment in record.personal (in path
// order) and is returned with its fresh salt; the event becomes
// schema_version 2. INVALID_ARGUMENT when a personal key holds anything
// but a string, or `event` is not schema_version 1.
absl::StatusOr<PersonalValues> CommitPersonalData(AuditEvent& event);

// Part of audit::Validate: a schema_version 1 event has no commitments; a
// schema_version 2 event holds no personal value, and its commitments are
// one per path, in path order, each a path of its type with a subject and
// 32 bytes. INVALID_ARGUMENT naming the first problem.
absl::Status ValidatePersonalData(const AuditEvent& event);

// The values of `values` that open a commitment of `event` (a valid event),
// in commitment order. Every other value, and a second value for a path, is
// left out and named in `refused` ("path: why").
std::vector<PersonalValue> OpenCommitments(const AuditEvent& event, const PersonalValues& values,
                                           std::vector<std::string>* refused);

// The commitment of `event` at `path`; nullptr when it has none.
const PersonalCommitment* FindCommitment(const AuditEvent& event, absl::string_view path);

// Puts each value back where its path says (a record field, or a key of
// old_value / new_value), as the record held it before it was committed.
void RestorePersonalValues(const std::vector<PersonalValue>& values, AuditRecord& record);

}  // namespace ulticode::audit
