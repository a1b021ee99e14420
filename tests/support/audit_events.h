// Audit events and stream entries as the owners produce them, for tests of
// the Admin side (which must see exactly what a real dispatcher publishes).
#pragma once

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/audit/event.h"
#include "common/redis/redis_client.h"
#include "tests/support/keys.h"

namespace ulticode::testing {

// A valid event: an Auth user creation (or an App problem creation).
inline audit::AuditEvent SampleEvent(audit::Owner owner, const std::string& entity_id,
                                     absl::Time at = absl::Now()) {
  const bool auth = owner == audit::v1::OWNER_AUTH;
  auto e = audit::NewEvent(owner, auth ? "auth.user.created" : "app.problem.created",
                           {"tester", "10.0.0.1", "test-agent", "req-1", ""}, at);
  auto* r = e.mutable_record();
  r->set_action(auth ? "create_user" : "create_problem");
  r->set_entity_type(auth ? "user" : "problem");
  r->set_entity_id(entity_id);
  r->set_subject(entity_id);
  (*r->mutable_new_value()->mutable_fields())["name"].set_string_value(
      absl::StrCat("name-", entity_id));
  return e;
}

// The entry a dispatcher publishes for `event` (see outbox::Dispatcher::EntryFor),
// signed by `signer` (default: the event owner's key of SharedTestKeys()).
inline redis::StreamFields EntryFields(const audit::AuditEvent& event,
                                       const crypto::SigningKey* signer = nullptr) {
  if (signer == nullptr) signer = &SharedTestKeys().owner(audit::OwnerName(event.owner()));
  const std::string envelope = audit::Serialize(event);
  return {{"event_id", event.event_id()},
          {"owner", audit::OwnerName(event.owner())},
          {"event_type", event.event_type()},
          {"schema_version", absl::StrCat(event.schema_version())},
          {"envelope", envelope},
          {"signature", signer->Sign(envelope).value()},
          {"key_id", signer->key_id()}};
}

// Replaces the envelope of `fields` and signs it again with `signer` (a
// producer that holds the key and sends bad bytes).
inline void ReplaceEnvelope(redis::StreamFields& fields, const std::string& envelope,
                            const crypto::SigningKey& signer) {
  for (auto& [name, value] : fields) {
    if (name == "envelope") value = envelope;
    if (name == "signature") value = signer.Sign(envelope).value();
  }
}

}  // namespace ulticode::testing
