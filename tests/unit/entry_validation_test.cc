// Admin's arrival check: ValidateEntry accepts exactly what an owner's
// dispatcher publishes (an envelope, its seal, the key id) and rejects
// everything else with its own PoisonReason, a detail naming the offending
// field or value, and the envelope's event id when one was readable.
#include "admin/inbox/entry_validation.h"

#include <algorithm>
#include <cctype>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "admin/inbox/batch.h"
#include "common/audit/event.h"
#include "common/ids/uuid.h"
#include "common/seal/seal.h"
#include "gmock/gmock.h"
#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "tests/support/keys.h"

namespace ulticode::admin::inbox {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr audit::Owner kAuth = audit::v1::OWNER_AUTH;
constexpr audit::Owner kApp = audit::v1::OWNER_APP;
constexpr char kOtherUuid[] = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

// Admin's clock in every test (2025-06-15, with sub-second precision).
const absl::Time kNow = absl::FromUnixMicros(1750000000123456);
// When the owner committed: a little before Admin reads it.
const absl::Time kOccurred = kNow - absl::Seconds(5);

audit::Actor TestActor() {
  return audit::Actor{"0190a1b2-0000-7000-8000-00000000a11c", "203.0.113.7", "ulticli/1.0",
                      "req-42", "4bf92f3577b34da6a3ce929d0e0e4736"};
}

// A complete auth.user.created event that passes audit::Validate.
audit::AuditEvent GoodEvent(absl::Time occurred_at = kOccurred) {
  audit::AuditEvent event = audit::NewEvent(kAuth, "auth.user.created", TestActor(), occurred_at);
  auto* r = event.mutable_record();
  r->set_action("create_user");
  r->set_entity_type("user");
  r->set_entity_id("0190a1b2-1111-7000-8000-000000000001");
  r->set_subject("0190a1b2-1111-7000-8000-000000000001");
  (*r->mutable_new_value()->mutable_fields())["login"].set_string_value("alice");
  return event;
}

audit::AuditEvent GoodAppEvent() {
  audit::AuditEvent event = audit::NewEvent(kApp, "app.problem.created", TestActor(), kOccurred);
  auto* r = event.mutable_record();
  r->set_action("create_problem");
  r->set_entity_type("problem");
  r->set_entity_id("0190a1b2-2222-7000-8000-000000000002");
  return event;
}

// Owner and Admin keys, and the directory Admin checks seals against.
const testing::TestKeys& Keys() {
  static const auto* keys = new testing::TestKeys;
  return *keys;
}

// `envelope` sealed by `key` as a bundle of one.
std::string SealOf(const std::string& envelope, const crypto::SigningKey& key) {
  return seal::SealBundle(key, {absl::string_view(envelope)}).value()[0];
}

// The entry exactly as a dispatcher publishes `envelope`'s bytes, sealed
// with `key` (default: the key of the event's owner, a producer holding it).
redis::StreamEntry EntryFor(const audit::AuditEvent& event, const std::string& envelope,
                            const crypto::SigningKey* key = nullptr) {
  if (key == nullptr) key = &Keys().owner(event.owner() == kApp ? "app" : "auth");
  redis::StreamEntry entry;
  entry.id = "1750000000000-0";
  entry.fields = {
      {"envelope", envelope}, {"seal", SealOf(envelope, *key)}, {"key_id", key->key_id()}};
  return entry;
}
redis::StreamEntry EntryFor(const audit::AuditEvent& event) {
  return EntryFor(event, audit::Serialize(event));
}

// Replaces the value of the (single) field `name`.
void SetField(redis::StreamEntry& entry, const std::string& name, const std::string& value) {
  for (auto& [n, v] : entry.fields) {
    if (n == name) {
      v = value;
      return;
    }
  }
  ADD_FAILURE() << "no field " << name;
}

void RemoveField(redis::StreamEntry& entry, const std::string& name) {
  std::erase_if(entry.fields, [&](const auto& f) { return f.first == name; });
}

size_t EntryBytes(const redis::StreamEntry& entry) {
  size_t total = 0;
  for (const auto& [n, v] : entry.fields) total += n.size() + v.size();
  return total;
}

AcceptedEntry ExpectAccepted(const Verdict& verdict) {
  if (const auto* r = std::get_if<Rejection>(&verdict)) {
    ADD_FAILURE() << "rejected: " << PoisonReasonName(r->reason) << ": " << r->detail;
    return {};
  }
  return std::get<AcceptedEntry>(verdict);
}

Rejection ExpectRejected(const Verdict& verdict, PoisonReason reason) {
  if (std::holds_alternative<AcceptedEntry>(verdict)) {
    ADD_FAILURE() << "accepted; expected " << PoisonReasonName(reason);
    return Rejection{PoisonReason::kConflict, "", ""};
  }
  Rejection r = std::get<Rejection>(verdict);
  EXPECT_EQ(PoisonReasonName(r.reason), PoisonReasonName(reason)) << r.detail;
  return r;
}

Verdict CheckOn(audit::Owner stream, const redis::StreamEntry& entry,
                const ValidationLimits& limits = {}) {
  seal::Verifier seals;
  return ValidateEntry(stream, entry, kNow, Keys().directory(), seals, limits);
}
Verdict Check(const redis::StreamEntry& entry, const ValidationLimits& limits = {}) {
  return CheckOn(kAuth, entry, limits);
}

// --- accepted -------------------------------------------------------------

TEST(EntryValidationTest, AcceptsWhatTheDispatcherPublishes) {
  const audit::AuditEvent event = GoodEvent();
  ASSERT_TRUE(audit::Validate(event).ok()) << audit::Validate(event);
  const std::string bytes = audit::Serialize(event);
  AcceptedEntry a = ExpectAccepted(Check(EntryFor(event, bytes)));
  EXPECT_EQ(a.event_id, event.event_id());
  EXPECT_TRUE(ids::IsValidUuid(a.event_id));
  EXPECT_EQ(a.owner, kAuth);
  EXPECT_EQ(a.event_type, "auth.user.created");
  EXPECT_EQ(a.occurred_at, kOccurred);  // NewEvent keeps microseconds
  EXPECT_EQ(a.envelope, bytes);         // the owner's exact bytes
  EXPECT_EQ(a.envelope.size(), bytes.size());
}

TEST(EntryValidationTest, AcceptsAnAppEventOnTheAppStream) {
  const audit::AuditEvent event = GoodAppEvent();
  AcceptedEntry a = ExpectAccepted(CheckOn(kApp, EntryFor(event)));
  EXPECT_EQ(a.owner, kApp);
  EXPECT_EQ(a.event_type, "app.problem.created");
  EXPECT_EQ(a.event_id, event.event_id());
}

TEST(EntryValidationTest, ToleratesExtraFieldsAndAnyFieldOrder) {
  const audit::AuditEvent event = GoodEvent();
  redis::StreamEntry entry = EntryFor(event);
  std::reverse(entry.fields.begin(), entry.fields.end());
  entry.fields.insert(entry.fields.begin() + 2, {"routing_hint", "shard-3"});
  AcceptedEntry a = ExpectAccepted(Check(entry));
  EXPECT_EQ(a.event_id, event.event_id());
  EXPECT_EQ(a.envelope, audit::Serialize(event));
}

// Bytes that are not the deterministic re-serialization are still kept as is.
TEST(EntryValidationTest, KeepsNonCanonicalEnvelopeBytes) {
  const audit::AuditEvent event = GoodEvent();
  // The same event with the record field first: still a valid AuditEvent.
  audit::AuditEvent record_only;
  *record_only.mutable_record() = event.record();
  audit::AuditEvent head = event;
  head.clear_record();
  const std::string bytes = audit::Serialize(record_only) + audit::Serialize(head);
  ASSERT_NE(bytes, audit::Serialize(event));
  AcceptedEntry a = ExpectAccepted(Check(EntryFor(event, bytes)));
  EXPECT_EQ(a.envelope, bytes);
}

// --- deleted / too large --------------------------------------------------

TEST(EntryValidationTest, DeletedEntry) {
  redis::StreamEntry entry;
  entry.id = "1750000000000-0";
  entry.deleted = true;
  Rejection r = ExpectRejected(Check(entry), PoisonReason::kDeleted);
  EXPECT_THAT(r.detail, HasSubstr("deleted"));
  EXPECT_EQ(r.event_id, "");
}

TEST(EntryValidationTest, EntryOverTheSizeLimit) {
  const redis::StreamEntry entry = EntryFor(GoodEvent());
  const size_t total = EntryBytes(entry);
  ValidationLimits limits;
  limits.max_entry_bytes = total;  // exactly at the limit: fine
  ExpectAccepted(Check(entry, limits));

  limits.max_entry_bytes = total - 1;
  Rejection r = ExpectRejected(Check(entry, limits), PoisonReason::kTooLarge);
  EXPECT_THAT(r.detail, AllOf(HasSubstr("entry"), HasSubstr(absl::StrCat(total, " bytes")),
                              HasSubstr(absl::StrCat(total - 1))));
}

TEST(EntryValidationTest, EnvelopeOverTheSizeLimit) {
  const audit::AuditEvent event = GoodEvent();
  const redis::StreamEntry entry = EntryFor(event);
  const size_t size = audit::Serialize(event).size();
  ValidationLimits limits;
  limits.max_event_bytes = size;  // exactly at the limit: fine
  ExpectAccepted(Check(entry, limits));

  limits.max_event_bytes = size - 1;
  Rejection r = ExpectRejected(Check(entry, limits), PoisonReason::kTooLarge);
  EXPECT_THAT(r.detail, AllOf(HasSubstr("envelope"), HasSubstr(absl::StrCat(size, " bytes")),
                              HasSubstr(absl::StrCat(size - 1))));
  EXPECT_EQ(r.event_id, "");  // bytes over the limit are never parsed
}

// --- field presence -------------------------------------------------------

class MissingFieldTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MissingFieldTest, Rejected) {
  const audit::AuditEvent event = GoodEvent();
  redis::StreamEntry entry = EntryFor(event);
  RemoveField(entry, GetParam());
  ASSERT_EQ(entry.fields.size(), 2u);
  Rejection r = ExpectRejected(Check(entry), PoisonReason::kMissingField);
  EXPECT_THAT(r.detail, AllOf(HasSubstr(GetParam()), HasSubstr("missing")));
  EXPECT_EQ(r.event_id, "");  // the id is inside what is missing
}

INSTANTIATE_TEST_SUITE_P(EntryValidationTest, MissingFieldTest, ::testing::Values("envelope"),
                         [](const auto& info) { return info.param; });

// --- seals ----------------------------------------------------------------

class MissingSignatureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MissingSignatureTest, RemovedOrEmptyIsUnsigned) {
  const audit::AuditEvent event = GoodEvent();
  for (bool remove : {true, false}) {
    redis::StreamEntry entry = EntryFor(event);
    if (remove) {
      RemoveField(entry, GetParam());
    } else {
      SetField(entry, GetParam(), "");
    }
    Rejection r = ExpectRejected(Check(entry), PoisonReason::kMissingSignature);
    EXPECT_THAT(r.detail, AllOf(HasSubstr(GetParam()), HasSubstr("unsealed")));
    EXPECT_EQ(r.event_id, event.event_id());
  }
}

INSTANTIATE_TEST_SUITE_P(EntryValidationTest, MissingSignatureTest,
                         ::testing::Values("seal", "key_id"),
                         [](const auto& info) { return info.param; });

TEST(EntryValidationTest, UnknownKeyIsRejected) {
  auto stranger = crypto::SigningKey::Generate();
  ASSERT_TRUE(stranger.ok());
  const audit::AuditEvent event = GoodEvent();
  redis::StreamEntry entry = EntryFor(event);
  SetField(entry, "seal", SealOf(audit::Serialize(event), *stranger));
  SetField(entry, "key_id", stranger->key_id());
  Rejection r = ExpectRejected(Check(entry), PoisonReason::kUnknownKey);
  EXPECT_THAT(r.detail, HasSubstr(stranger->key_id()));
  EXPECT_EQ(r.event_id, event.event_id());
}

TEST(EntryValidationTest, AnotherOwnersKeyIsRejected) {
  // App's key is valid, but not for the auth stream.
  const audit::AuditEvent event = GoodEvent();
  const std::string bytes = audit::Serialize(event);
  redis::StreamEntry entry = EntryFor(event, bytes);
  SetField(entry, "seal", SealOf(bytes, Keys().app()));
  SetField(entry, "key_id", Keys().app().key_id());
  Rejection r = ExpectRejected(Check(entry), PoisonReason::kKeyOwnerMismatch);
  EXPECT_THAT(r.detail, AllOf(HasSubstr("belongs to app"), HasSubstr("not to auth")));
  // Admin's own key cannot sign an owner's events either.
  SetField(entry, "seal", SealOf(bytes, Keys().admin()));
  SetField(entry, "key_id", Keys().admin().key_id());
  ExpectRejected(Check(entry), PoisonReason::kKeyOwnerMismatch);
}

TEST(EntryValidationTest, ForgedCopyWithAFreshEventIdIsABadSignature) {
  // A forger with Redis access copies a real entry, gives it a fresh event id
  // and another actor, and keeps the owner's seal.
  const audit::AuditEvent real = GoodEvent();
  const redis::StreamEntry original = EntryFor(real);
  audit::AuditEvent forged = real;
  const std::string fresh = ids::NewUuidV7();
  forged.set_event_id(fresh);
  forged.mutable_record()->set_audit_id(fresh);
  forged.mutable_record()->set_actor("mallory");
  redis::StreamEntry entry = original;
  SetField(entry, "envelope", audit::Serialize(forged));
  Rejection r = ExpectRejected(Check(entry), PoisonReason::kBadSignature);
  EXPECT_THAT(r.detail, HasSubstr("does not verify"));
  EXPECT_EQ(r.event_id, fresh);
  ExpectAccepted(Check(original));
}

// Every single-bit change of a seal (its version, index, size, path or
// signature), and every truncation or extension of it, is refused.
TEST(EntryValidationTest, EveryAlteredSealIsABadSignature) {
  const audit::AuditEvent a = GoodEvent(), b = GoodEvent(), c = GoodEvent();
  const std::vector<std::string> envelopes = {audit::Serialize(a), audit::Serialize(b),
                                              audit::Serialize(c)};
  const std::vector<absl::string_view> views(envelopes.begin(), envelopes.end());
  const std::vector<std::string> seals = seal::SealBundle(Keys().auth(), views).value();
  redis::StreamEntry entry = EntryFor(b, envelopes[1]);
  SetField(entry, "seal", seals[1]);
  ExpectAccepted(Check(entry));
  for (size_t byte = 0; byte < seals[1].size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string altered = seals[1];
      altered[byte] = static_cast<char>(altered[byte] ^ (1 << bit));
      SetField(entry, "seal", altered);
      ExpectRejected(Check(entry), PoisonReason::kBadSignature);
    }
  }
  for (size_t n = 0; n < seals[1].size(); ++n) {
    SetField(entry, "seal", seals[1].substr(0, n));
    ExpectRejected(Check(entry),
                   n == 0 ? PoisonReason::kMissingSignature : PoisonReason::kBadSignature);
  }
  SetField(entry, "seal", seals[1] + "x");
  ExpectRejected(Check(entry), PoisonReason::kBadSignature);
  // Another event's seal of the same bundle proves another leaf.
  for (size_t other : {0u, 2u}) {
    SetField(entry, "seal", seals[other]);
    ExpectRejected(Check(entry), PoisonReason::kBadSignature);
  }
}

TEST(EntryValidationTest, EveryEventOfABundleIsAccepted) {
  std::vector<audit::AuditEvent> events;
  std::vector<std::string> envelopes;
  for (int i = 0; i < 37; ++i) {
    events.push_back(GoodEvent());
    envelopes.push_back(audit::Serialize(events.back()));
  }
  const std::vector<absl::string_view> views(envelopes.begin(), envelopes.end());
  const std::vector<std::string> seals = seal::SealBundle(Keys().auth(), views).value();
  seal::Verifier shared;  // as the bridge: one verification for the bundle
  for (size_t i = 0; i < events.size(); ++i) {
    redis::StreamEntry entry = EntryFor(events[i], envelopes[i]);
    SetField(entry, "seal", seals[i]);
    AcceptedEntry got =
        ExpectAccepted(ValidateEntry(kAuth, entry, kNow, Keys().directory(), shared));
    EXPECT_EQ(got.event_id, events[i].event_id());
    EXPECT_EQ(got.seal, seals[i]);
  }
  EXPECT_EQ(shared.verifications(), 1u) << "one Ed25519 verification for the bundle";
}

TEST(EntryValidationTest, EmptyEntryIsMissingFields) {
  redis::StreamEntry entry;
  entry.id = "1750000000000-0";
  Rejection r = ExpectRejected(Check(entry), PoisonReason::kMissingField);
  EXPECT_THAT(r.detail, HasSubstr("envelope"));
  EXPECT_EQ(r.event_id, "");
}

class DuplicateFieldTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DuplicateFieldTest, Rejected) {
  const audit::AuditEvent event = GoodEvent();
  redis::StreamEntry entry = EntryFor(event);
  // Even a second copy with the very same value is refused: which one to trust?
  std::string value;
  for (const auto& [n, v] : entry.fields)
    if (n == GetParam()) value = v;
  entry.fields.emplace_back(GetParam(), value);
  Rejection r = ExpectRejected(Check(entry), PoisonReason::kDuplicateField);
  EXPECT_THAT(r.detail, AllOf(HasSubstr(GetParam()), HasSubstr("twice")));
}

INSTANTIATE_TEST_SUITE_P(EntryValidationTest, DuplicateFieldTest,
                         ::testing::Values("envelope", "seal", "key_id"),
                         [](const auto& info) { return info.param; });

TEST(EntryValidationTest, DuplicateEnvelopeWithADifferentValue) {
  const audit::AuditEvent event = GoodEvent();
  redis::StreamEntry entry = EntryFor(event);
  entry.fields.emplace_back("envelope", audit::Serialize(GoodEvent()));
  Rejection r = ExpectRejected(Check(entry), PoisonReason::kDuplicateField);
  EXPECT_THAT(r.detail, HasSubstr("envelope"));
  EXPECT_EQ(r.event_id, "");  // two envelopes: none is trusted
}

// --- the sealed event's identity, owner, type and version ----------------

struct BadId {
  std::string name;
  std::string id;
  std::string shown;  // how the detail echoes it
};
void PrintTo(const BadId& b, std::ostream* os) { *os << b.name; }

class BadEventIdTest : public ::testing::TestWithParam<BadId> {};

TEST_P(BadEventIdTest, Rejected) {
  // Sealed by the owner's key, so only the id's form is wrong.
  audit::AuditEvent event = GoodEvent();
  event.set_event_id(GetParam().id);
  event.mutable_record()->set_audit_id(GetParam().id);
  Rejection r = ExpectRejected(Check(EntryFor(event)), PoisonReason::kBadEventId);
  EXPECT_THAT(r.detail, AllOf(HasSubstr("event_id"), HasSubstr("\"" + GetParam().shown + "\"")));
  EXPECT_EQ(r.event_id, "");  // a bad id is never carried into the poison row
}

std::vector<BadId> BadIds() {
  const std::string good = GoodEvent().event_id();
  const std::string upper = absl::AsciiStrToUpper(good);
  return {
      {"Uppercase", upper, upper},
      {"Garbage", "not-a-uuid", "not-a-uuid"},
      {"Empty", "", ""},
      {"Braced", "{" + good + "}", "{" + good + "}"},
      {"NoHyphens", "0190a1b2c3d47e5f8a9b0c1d2e3f4a5b", "0190a1b2c3d47e5f8a9b0c1d2e3f4a5b"},
      {"TrailingNewline", good + "\n", good + "?"},
      {"Long", std::string(100, 'a'), std::string(64, 'a')},
  };
}

INSTANTIATE_TEST_SUITE_P(EntryValidationTest, BadEventIdTest, ::testing::ValuesIn(BadIds()),
                         [](const auto& info) { return info.param.name; });

TEST(EntryValidationTest, UnknownEventType) {
  audit::AuditEvent event = GoodEvent();
  event.set_event_type("auth.user.exploded");
  Rejection r = ExpectRejected(Check(EntryFor(event)), PoisonReason::kUnknownEventType);
  EXPECT_THAT(r.detail, AllOf(HasSubstr("event_type"), HasSubstr("\"auth.user.exploded\""),
                              HasSubstr("auth")));
  EXPECT_EQ(r.event_id, event.event_id());
}

TEST(EntryValidationTest, AppEventTypeOnTheAuthStream) {
  // The envelope says auth, but the type belongs to App.
  audit::AuditEvent event = GoodEvent();
  event.set_event_type("app.problem.created");
  Rejection r = ExpectRejected(Check(EntryFor(event)), PoisonReason::kUnknownEventType);
  EXPECT_THAT(r.detail, AllOf(HasSubstr("\"app.problem.created\""), HasSubstr("owner auth")));
  EXPECT_EQ(r.event_id, event.event_id());
}

TEST(EntryValidationTest, UnsupportedSchemaVersion) {
  for (const uint32_t version : {0u, 3u, 4294967295u}) {
    audit::AuditEvent event = GoodEvent();
    event.set_schema_version(version);
    Rejection r = ExpectRejected(Check(EntryFor(event)), PoisonReason::kUnsupportedSchemaVersion);
    EXPECT_THAT(r.detail, AllOf(HasSubstr("schema_version"), HasSubstr(absl::StrCat(version))))
        << version;
    EXPECT_EQ(r.event_id, event.event_id()) << version;
  }
}

// --- envelope -------------------------------------------------------------

TEST(EntryValidationTest, UnparseableEnvelope) {
  const audit::AuditEvent event = GoodEvent();
  const std::string good = audit::Serialize(event);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"empty", ""},
      {"text", "not a protobuf"},  // 'n' = field 13, wire type 6: invalid
      {"overlong varint", std::string(12, '\xff')},
      {"truncated", good.substr(0, good.size() - 1)},
      {"json", R"({"event_id":"x"})"},
  };
  for (const auto& [what, bytes] : cases) {
    audit::AuditEvent probe;
    ASSERT_FALSE(!bytes.empty() && probe.ParseFromString(bytes)) << what << " parses";
    Rejection r = ExpectRejected(Check(EntryFor(event, bytes)), PoisonReason::kEnvelopeUnparseable);
    EXPECT_THAT(r.detail, AllOf(HasSubstr("envelope"), HasSubstr("AuditEvent"))) << what;
    EXPECT_EQ(r.event_id, "") << what;
  }
}

// Random bytes are never accepted; those protobuf cannot parse are
// envelope_unparseable, the rest fail a later check.
TEST(EntryValidationTest, RandomEnvelopesAreNeverAccepted) {
  google::protobuf::LogSilencer quiet;  // invalid UTF-8 in string fields is logged
  const audit::AuditEvent event = GoodEvent();
  std::mt19937 rng(20250615);
  std::uniform_int_distribution<int> len(1, 300), byte(0, 255);
  int unparseable = 0;
  for (int i = 0; i < 500; ++i) {
    std::string bytes(len(rng), '\0');
    for (char& c : bytes) c = static_cast<char>(byte(rng));
    const Verdict v = Check(EntryFor(event, bytes));
    ASSERT_TRUE(std::holds_alternative<Rejection>(v)) << i;
    const Rejection& r = std::get<Rejection>(v);
    audit::AuditEvent probe;
    if (!probe.ParseFromString(bytes)) {
      ++unparseable;
      EXPECT_EQ(PoisonReasonName(r.reason), "envelope_unparseable") << i;
    }
  }
  EXPECT_GT(unparseable, 0);
}

TEST(EntryValidationTest, RecordAuditIdDiffersFromTheEventId) {
  audit::AuditEvent event = GoodEvent();
  event.mutable_record()->set_audit_id(kOtherUuid);
  Rejection r = ExpectRejected(Check(EntryFor(event)), PoisonReason::kAuditIdMismatch);
  EXPECT_THAT(r.detail, AllOf(HasSubstr("record.audit_id"), HasSubstr(kOtherUuid)));
  EXPECT_EQ(r.event_id, event.event_id());

  // A missing record has no audit id either.
  event.clear_record();
  r = ExpectRejected(Check(EntryFor(event)), PoisonReason::kAuditIdMismatch);
  EXPECT_THAT(r.detail, HasSubstr("record.audit_id \"\""));
}

TEST(EntryValidationTest, EnvelopeOwnerOfAnotherOwner) {
  audit::AuditEvent event = GoodEvent();
  event.set_owner(kApp);
  // Sealed by Auth's key: a compromised Auth writing App's history.
  Rejection r = ExpectRejected(Check(EntryFor(event, audit::Serialize(event), &Keys().auth())),
                               PoisonReason::kEnvelopeOwnerMismatch);
  EXPECT_THAT(r.detail,
              AllOf(HasSubstr("envelope owner"), HasSubstr("\"app\""), HasSubstr("auth stream")));
  EXPECT_EQ(r.event_id, event.event_id());

  event.set_owner(audit::v1::OWNER_UNSPECIFIED);
  r = ExpectRejected(Check(EntryFor(event, audit::Serialize(event), &Keys().auth())),
                     PoisonReason::kEnvelopeOwnerMismatch);
  EXPECT_THAT(r.detail, HasSubstr("envelope owner \"\""));
}

// --- occurred_at ----------------------------------------------------------

TEST(EntryValidationTest, OccurredAtMissing) {
  audit::AuditEvent event = GoodEvent();
  event.clear_occurred_at();
  Rejection r = ExpectRejected(Check(EntryFor(event)), PoisonReason::kBadTimestamp);
  EXPECT_THAT(r.detail, AllOf(HasSubstr("occurred_at"), HasSubstr("missing")));
  EXPECT_EQ(r.event_id, event.event_id());
}

TEST(EntryValidationTest, OccurredAtMalformedNanos) {
  for (int nanos : {-1, 1000000000}) {
    audit::AuditEvent event = GoodEvent();
    event.mutable_occurred_at()->set_nanos(nanos);
    Rejection r = ExpectRejected(Check(EntryFor(event)), PoisonReason::kBadTimestamp);
    EXPECT_THAT(r.detail, AllOf(HasSubstr("occurred_at"), HasSubstr("malformed"))) << nanos;
  }
}

TEST(EntryValidationTest, OccurredAtBefore2020) {
  const ValidationLimits limits;
  ASSERT_EQ(limits.min_occurred_at, absl::FromUnixSeconds(1577836800));

  // Exactly the floor is fine.
  ExpectAccepted(Check(EntryFor(GoodEvent(limits.min_occurred_at))));

  for (absl::Time t : {limits.min_occurred_at - absl::Microseconds(1),
                       absl::FromUnixSeconds(1000000000), absl::FromUnixSeconds(1)}) {
    const audit::AuditEvent event = GoodEvent(t);
    Rejection r = ExpectRejected(Check(EntryFor(event)), PoisonReason::kBadTimestamp);
    EXPECT_THAT(r.detail, AllOf(HasSubstr("occurred_at"), HasSubstr("is before")));
    EXPECT_EQ(r.event_id, event.event_id());
  }
}

TEST(EntryValidationTest, OccurredAtTooFarInTheFuture) {
  const ValidationLimits limits;
  ASSERT_EQ(limits.max_future_skew, absl::Minutes(10));
  for (absl::Time t : {kNow + absl::Minutes(10) + absl::Microseconds(1), kNow + absl::Hours(1),
                       absl::FromUnixSeconds(253402300799) /* 9999-12-31 */}) {
    const audit::AuditEvent event = GoodEvent(t);
    Rejection r = ExpectRejected(Check(EntryFor(event)), PoisonReason::kBadTimestamp);
    EXPECT_THAT(r.detail,
                AllOf(HasSubstr("occurred_at"), HasSubstr("10m"), HasSubstr("in the future")));
    EXPECT_EQ(r.event_id, event.event_id());
  }
}

TEST(EntryValidationTest, OccurredAtWithinTheAllowedSkew) {
  for (absl::Time t : {kNow, kNow + absl::Minutes(9), kNow + absl::Minutes(10) - absl::Seconds(1),
                       kNow + absl::Minutes(10)}) {
    AcceptedEntry a = ExpectAccepted(Check(EntryFor(GoodEvent(t))));
    EXPECT_EQ(a.occurred_at, t);
  }
  // The skew is configurable.
  ValidationLimits tight;
  tight.max_future_skew = absl::Seconds(1);
  Rejection r = ExpectRejected(Check(EntryFor(GoodEvent(kNow + absl::Seconds(2))), tight),
                               PoisonReason::kBadTimestamp);
  EXPECT_THAT(r.detail, HasSubstr("1s in the future"));
}

// --- the record -----------------------------------------------------------

TEST(EntryValidationTest, RecordWithEmptyActor) {
  audit::AuditEvent event = GoodEvent();
  event.mutable_record()->clear_actor();
  Rejection r = ExpectRejected(Check(EntryFor(event)), PoisonReason::kInvalidRecord);
  EXPECT_THAT(r.detail, HasSubstr("record.actor"));
  EXPECT_EQ(r.event_id, event.event_id());
}

TEST(EntryValidationTest, RecordMissingWhatChanged) {
  for (const std::string field : {"action", "entity_type", "entity_id"}) {
    audit::AuditEvent event = GoodEvent();
    auto* r = event.mutable_record();
    if (field == "action") r->clear_action();
    if (field == "entity_type") r->clear_entity_type();
    if (field == "entity_id") r->clear_entity_id();
    Rejection rej = ExpectRejected(Check(EntryFor(event)), PoisonReason::kInvalidRecord);
    EXPECT_THAT(rej.detail, HasSubstr("record." + field)) << field;
    EXPECT_EQ(rej.event_id, event.event_id()) << field;
  }
}

// --- names ----------------------------------------------------------------

TEST(EntryValidationTest, PoisonReasonNamesAreStableSnakeCase) {
  const std::vector<std::pair<PoisonReason, std::string>> expected = {
      {PoisonReason::kDeleted, "deleted"},
      {PoisonReason::kTooLarge, "too_large"},
      {PoisonReason::kMissingField, "missing_field"},
      {PoisonReason::kDuplicateField, "duplicate_field"},
      {PoisonReason::kBadEventId, "bad_event_id"},
      {PoisonReason::kUnknownEventType, "unknown_event_type"},
      {PoisonReason::kUnsupportedSchemaVersion, "unsupported_schema_version"},
      {PoisonReason::kEnvelopeUnparseable, "envelope_unparseable"},
      {PoisonReason::kAuditIdMismatch, "audit_id_mismatch"},
      {PoisonReason::kEnvelopeOwnerMismatch, "envelope_owner_mismatch"},
      {PoisonReason::kBadTimestamp, "bad_timestamp"},
      {PoisonReason::kInvalidRecord, "invalid_record"},
      {PoisonReason::kConflict, "conflict"},
      {PoisonReason::kMissingSignature, "missing_signature"},
      {PoisonReason::kUnknownKey, "unknown_key"},
      {PoisonReason::kKeyOwnerMismatch, "key_owner_mismatch"},
      {PoisonReason::kBadSignature, "bad_signature"},
      {PoisonReason::kEventIdOfAnotherOwner, "event_id_of_another_owner"},
  };
  // Every enumerator, in declaration order (kLastPoisonReason is the last).
  ASSERT_EQ(expected.size(), static_cast<size_t>(kLastPoisonReason) + 1);
  std::set<std::string> seen;
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& [reason, name] = expected[i];
    EXPECT_EQ(static_cast<size_t>(reason), i);
    const std::string got(PoisonReasonName(reason));
    EXPECT_EQ(got, name);
    EXPECT_TRUE(seen.insert(got).second) << "duplicate name " << got;
    ASSERT_FALSE(got.empty());
    EXPECT_TRUE(std::islower(static_cast<unsigned char>(got.front()))) << got;
    EXPECT_NE(got.back(), '_') << got;
    EXPECT_EQ(got.find("__"), std::string::npos) << got;
    for (char c : got) EXPECT_TRUE(std::islower(static_cast<unsigned char>(c)) || c == '_') << got;
  }
}

// --- one batch (PrepareBatch) ----------------------------------------------

// The bridge and the poison replay share these rules: a repeat of an event
// with the same bytes collapses into its first copy, other bytes under the
// same id are a conflict, an invalid entry is refused with the validator's
// reason, and the arrivals come out in event id order (the order writers lock
// inbox keys in), each still naming the item it came from.
TEST(PrepareBatchTest, CollapsesRefusesAndSortsByEventId) {
  const audit::AuditEvent early = GoodEvent();
  const audit::AuditEvent late = GoodEvent();
  ASSERT_LT(early.event_id(), late.event_id());
  audit::AuditEvent early_changed = early;
  (*early_changed.mutable_record()->mutable_new_value()->mutable_fields())["login"]
      .set_string_value("mallory");
  redis::StreamEntry unsigned_entry = EntryFor(GoodEvent());
  RemoveField(unsigned_entry, "seal");

  const std::vector<redis::StreamEntry> entries = {EntryFor(late), EntryFor(early), EntryFor(late),
                                                   EntryFor(early_changed), unsigned_entry};
  std::vector<BatchItem> items;
  for (const auto& e : entries) items.push_back({kAuth, "audit:auth", &e});
  seal::Verifier seals;
  const PreparedBatch batch = PrepareBatch(items, kNow, Keys().directory(), seals, {});

  ASSERT_EQ(batch.arrivals.size(), 2u);
  EXPECT_EQ(batch.arrivals[0].entry.event_id, early.event_id());
  EXPECT_EQ(batch.arrivals[1].entry.event_id, late.event_id());
  EXPECT_EQ(batch.arrivals[0].stream, "audit:auth");
  EXPECT_THAT(batch.arrival_items, ::testing::ElementsAre(1u, 0u));
  // The repeat of `late` (item 2) points at late's arrival after the sort.
  EXPECT_THAT(batch.repeats, ::testing::ElementsAre(::testing::Pair(2u, 1u)));
  ASSERT_EQ(batch.refused.size(), 2u);
  EXPECT_EQ(batch.refused[0].item, 3u);
  EXPECT_EQ(PoisonReasonName(batch.refused[0].reason), PoisonReasonName(PoisonReason::kConflict));
  EXPECT_EQ(batch.refused[0].event_id, early.event_id());
  EXPECT_EQ(batch.refused[1].item, 4u);
  const Rejection direct = std::get<Rejection>(Check(unsigned_entry));
  EXPECT_EQ(PoisonReasonName(batch.refused[1].reason), PoisonReasonName(direct.reason));
  EXPECT_EQ(batch.refused[1].detail, direct.detail);
}

}  // namespace
}  // namespace ulticode::admin::inbox
