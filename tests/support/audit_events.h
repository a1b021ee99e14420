// Audit events and stream entries as the owners produce them, for tests of
// the Admin side (which must see exactly what a real dispatcher publishes).
#pragma once

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/audit/event.h"
#include "common/redis/redis_client.h"
#include "common/seal/seal.h"
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

// The entry a dispatcher publishes for `event` (see outbox::Dispatcher),
// sealed by `signer` (default: the event owner's key of SharedTestKeys()) as
// a bundle of one.
inline redis::StreamFields EntryFields(const audit::AuditEvent& event,
                                       const crypto::SigningKey* signer = nullptr) {
  if (signer == nullptr) signer = &SharedTestKeys().owner(audit::OwnerName(event.owner()));
  const std::string envelope = audit::Serialize(event);
  return {{audit::kEnvelopeField, envelope},
          {audit::kSealField, seal::SealBundle(*signer, {absl::string_view(envelope)}).value()[0]},
          {audit::kKeyIdField, signer->key_id()}};
}

// The entries of `events` as one dispatcher cycle publishes them: one bundle
// sealed by `signer` (default: the first event owner's key).
inline std::vector<redis::StreamFields> BundleFields(const std::vector<audit::AuditEvent>& events,
                                                     const crypto::SigningKey* signer = nullptr) {
  if (events.empty()) return {};
  if (signer == nullptr) signer = &SharedTestKeys().owner(audit::OwnerName(events[0].owner()));
  std::vector<std::string> envelopes;
  for (const auto& e : events) envelopes.push_back(audit::Serialize(e));
  const std::vector<absl::string_view> views(envelopes.begin(), envelopes.end());
  const std::vector<std::string> seals = seal::SealBundle(*signer, views).value();
  std::vector<redis::StreamFields> out;
  for (size_t i = 0; i < envelopes.size(); ++i) {
    out.push_back({{audit::kEnvelopeField, envelopes[i]},
                   {audit::kSealField, seals[i]},
                   {audit::kKeyIdField, signer->key_id()}});
  }
  return out;
}

// Replaces the envelope of `fields` and seals it again with `signer` (a
// producer that holds the key and sends bad bytes).
inline void ReplaceEnvelope(redis::StreamFields& fields, const std::string& envelope,
                            const crypto::SigningKey& signer) {
  const std::string sealed = seal::SealBundle(signer, {absl::string_view(envelope)}).value()[0];
  for (auto& [name, value] : fields) {
    if (name == audit::kEnvelopeField) value = envelope;
    if (name == audit::kSealField) value = sealed;
    if (name == audit::kKeyIdField) value = signer.key_id();
  }
}

}  // namespace ulticode::testing
