// Personal data in the contract (common/audit/personal.h): every event type
// the owners emit, built by its real builder from seeded random data, keeps
// no byte of a personal value in its envelope once committed, and its
// values open their commitments and restore the event exactly; a value
// changed in any way opens nothing. Seeded: ULTICODE_PERSONAL_SEED.
#include "common/audit/personal.h"

#include <cstdlib>
#include <random>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "app/app_events.h"
#include "auth/auth_events.h"
#include "common/audit/event.h"
#include "common/mutation/actor.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace ulticode::audit {
namespace {

using ::testing::HasSubstr;

uint32_t Seed() {
  const char* env = std::getenv("ULTICODE_PERSONAL_SEED");
  return env != nullptr ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10))
                        : std::random_device{}();
}

// Random text that no other part of an event can hold by chance: a
// 12-character token over a wide alphabet, some of it outside ASCII.
class Texts {
 public:
  explicit Texts(std::mt19937& rng) : rng_(rng) {}
  std::string Next() {
    static const std::vector<std::string> kAlphabet = {"a", "b", "k", "q", "z", "0", "7",  "@", ".",
                                                       "-", "_", "+", "é", "ß", "Ж", "中", "😀"};
    std::string s;
    for (int i = 0; i < 12; ++i) s += kAlphabet[Pick(kAlphabet.size())];
    return s;
  }
  size_t Pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

 private:
  std::mt19937& rng_;
};

// One event of every type the owners emit, from the services' own builders;
// `personal` gets every personal value the event was built with.
std::vector<AuditEvent> EveryOwnerEvent(Texts& t, std::vector<std::string>& personal) {
  const Actor actor{.principal = t.Next(),
                    .client_ip = t.Next(),
                    .user_agent = t.Next(),
                    .request_id = t.Next(),
                    .trace_id = t.Next()};
  personal = {actor.client_ip, actor.user_agent};
  auth::store::UserRow user{.user_id = t.Next(),
                            .username = t.Next(),
                            .email = t.Next(),
                            .display_name = t.Next(),
                            .status = "ACTIVE"};
  const std::string reason = t.Next();
  personal.insert(personal.end(), {user.username, user.email, user.display_name, reason});
  auth::store::UserRow disabled = user;
  disabled.status = "DISABLED";
  auth::store::PolicyRow policy;
  app::store::ProblemRow problem{.problem_id = t.Next(), .slug = t.Next(), .title = t.Next()};
  app::store::ContestRow contest{.contest_id = t.Next(), .slug = t.Next(), .title = t.Next()};
  std::vector<AuditEvent> events = {
      auth::events::UserCreated(actor, user),
      auth::events::UserDisabled(actor, user.user_id, user, disabled, reason),
      auth::events::RoleAssigned(actor, user.user_id, t.Next(), {}, {{t.Next()}, 1}),
      auth::events::RoleRevoked(actor, user.user_id, t.Next(), {{t.Next()}, 1}, {}),
      auth::events::LoginPolicyUpdated(actor, policy, policy),
      app::events::ProblemCreated(actor, problem),
      app::events::ProblemUpdated(actor, problem.problem_id, problem, {.title = t.Next()}),
      app::events::ContestCreated(actor, contest),
      app::events::ContestProblemAdded(actor, contest.contest_id, problem.problem_id, "A"),
      app::events::ContestProblemRemoved(actor, contest.contest_id, problem.problem_id, "A"),
      app::events::ContestPublished(actor, contest.contest_id, contest),
  };
  // The operations' events (owner/operations, owner/outbox/number_attestor,
  // admin/operations) carry counts, times and ids in their values; their
  // personal data is the actor's, which the record's fields hold.
  std::set<std::string> built;
  for (const AuditEvent& e : events) built.insert(e.event_type());
  for (const EventTypeContract& c : EventTypes()) {
    if (!built.contains(c.type) &&
        (absl::StrContains(c.type, ".outbox.") || absl::StrContains(c.type, ".personal_data.") ||
         c.owner == v1::OWNER_ADMIN)) {
      events.push_back(mutation::BuildEvent(
          c.owner, actor,
          {.event_type = c.type.c_str(),
           .action = "operate",
           .subject = t.Next(),
           .entity_type = "outbox",
           .entity_id = t.Next(),
           .new_value = mutation::Values().Set("count", int64_t{3}).Set("note", t.Next())}));
    }
  }
  return events;
}

TEST(PersonalDataTest, EveryEventTypeKeepsNoPersonalByteInItsEnvelope) {
  const uint32_t seed = Seed();
  SCOPED_TRACE(absl::StrCat("ULTICODE_PERSONAL_SEED=", seed));
  std::mt19937 rng(seed);
  Texts texts(rng);
  std::set<std::string> covered;
  for (int round = 0; round < 50; ++round) {
    std::vector<std::string> personal;
    for (AuditEvent event : EveryOwnerEvent(texts, personal)) {
      SCOPED_TRACE(event.event_type());
      covered.insert(event.event_type());
      ASSERT_TRUE(Validate(event).ok()) << Validate(event);
      const AuditEvent built = event;
      absl::StatusOr<PersonalValues> values = CommitPersonalData(event);
      ASSERT_TRUE(values.ok()) << values.status();
      ASSERT_TRUE(Validate(event).ok()) << Validate(event);
      EXPECT_EQ(event.schema_version(), kSchemaVersion);
      const std::string envelope = Serialize(event);
      for (const std::string& p : personal) {
        EXPECT_FALSE(absl::StrContains(envelope, p)) << "personal value " << p << " embedded";
      }
      std::vector<std::string> refused;
      const std::vector<PersonalValue> opened = OpenCommitments(event, *values, &refused);
      EXPECT_THAT(refused, ::testing::IsEmpty());
      ASSERT_EQ(opened.size(), static_cast<size_t>(event.record().personal_size()));
      AuditEvent restored = event;
      RestorePersonalValues(opened, *restored.mutable_record());
      restored.mutable_record()->clear_personal();
      restored.set_schema_version(kEmbeddedPersonalDataSchemaVersion);
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(restored, built))
          << restored.DebugString() << "\nvs built\n"
          << built.DebugString();
    }
  }
  std::set<std::string> all;
  for (const EventTypeContract& c : EventTypes()) all.insert(c.type);
  EXPECT_EQ(covered, all) << "an event type without a builder in this test";
}

// Any change to an opened value (a byte, its salt, its path, the event it
// is claimed for) opens nothing, and only that value is refused.
TEST(PersonalDataTest, AChangedValueOpensNoCommitment) {
  const uint32_t seed = Seed();
  SCOPED_TRACE(absl::StrCat("ULTICODE_PERSONAL_SEED=", seed));
  std::mt19937 rng(seed);
  Texts texts(rng);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::string> personal;
    std::vector<AuditEvent> events = EveryOwnerEvent(texts, personal);
    AuditEvent event = events[texts.Pick(2)];  // the user events: 3 to 6 values
    PersonalValues values = CommitPersonalData(event).value();
    const int victim = static_cast<int>(texts.Pick(values.values_size()));
    PersonalValue& v = *values.mutable_values(victim);
    std::string what;
    switch (texts.Pick(5)) {
      case 0:
        what = "a value byte";
        if (v.value().empty()) {
          v.set_value("x");
        } else {
          (*v.mutable_value())[texts.Pick(v.value().size())] ^= 0x01;
        }
        break;
      case 1:
        what = "a salt byte";
        (*v.mutable_salt())[texts.Pick(v.salt().size())] ^= 0x80;
        break;
      case 2:
        what = "the value of another path";
        v.set_value(values.values((victim + 1) % values.values_size()).value() + "~");
        break;
      case 3:
        what = "another event's id";
        event.set_event_id(events[2].event_id());
        event.mutable_record()->set_audit_id(events[2].event_id());
        break;
      default:
        what = "a value grown by one character";
        v.mutable_value()->append("a");
        break;
    }
    SCOPED_TRACE(what);
    std::vector<std::string> refused;
    const std::vector<PersonalValue> opened = OpenCommitments(event, values, &refused);
    if (what == "another event's id") {
      EXPECT_TRUE(opened.empty());
      continue;
    }
    EXPECT_EQ(opened.size(), static_cast<size_t>(values.values_size() - 1));
    ASSERT_EQ(refused.size(), 1u);
    EXPECT_THAT(refused[0], HasSubstr(v.path()));
  }
}

AuditEvent CommittedUser() {
  mutation::Values v;
  v.Set("username", "alice").Set("email", "alice@example.com").Set("status", "ACTIVE");
  AuditEvent event =
      mutation::BuildEvent(v1::OWNER_AUTH, {"admin-1", "10.1.2.3", "grpcurl/1.8", "", ""},
                           {.event_type = "auth.user.created",
                            .action = "create_user",
                            .subject = "user-1",
                            .entity_type = "user",
                            .entity_id = "user-1",
                            .new_value = v});
  EXPECT_TRUE(CommitPersonalData(event).ok());
  return event;
}

// Validate names the first problem with the personal data of an envelope.
TEST(PersonalDataTest, ValidateNamesPersonalDataOutOfPlace) {
  struct Case {
    std::string name;
    std::function<void(AuditEvent&)> change;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"ip embedded", [](AuditEvent& e) { e.mutable_record()->set_client_ip("10.9.9.9"); },
       "record.client_ip is personal"},
      {"email embedded",
       [](AuditEvent& e) {
         (*e.mutable_record()->mutable_new_value()->mutable_fields())["email"].set_string_value(
             "x@y");
       },
       "record.new_value.email is personal"},
      {"unknown path",
       [](AuditEvent& e) { e.mutable_record()->mutable_personal(0)->set_path("new_value.status"); },
       "is not a personal path"},
      {"paths out of order",
       [](AuditEvent& e) { e.mutable_record()->mutable_personal()->SwapElements(0, 1); },
       "unique and in order"},
      {"path twice",
       [](AuditEvent& e) { *e.mutable_record()->add_personal() = e.record().personal(0); },
       "unique and in order"},
      {"another subject",
       [](AuditEvent& e) { e.mutable_record()->mutable_personal(0)->set_subject("user-2"); },
       "the actor"},
      {"short commitment",
       [](AuditEvent& e) { e.mutable_record()->mutable_personal(0)->set_commitment("abc"); },
       "not 32 bytes"},
      {"commitments in schema 1",
       [](AuditEvent& e) { e.set_schema_version(kEmbeddedPersonalDataSchemaVersion); },
       "schema_version 1 embeds"},
  };
  ASSERT_TRUE(Validate(CommittedUser()).ok());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    AuditEvent e = CommittedUser();
    c.change(e);
    const absl::Status status = Validate(e);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_THAT(status.message(), HasSubstr(c.expected));
  }
}

// The one commitment format, fixed by a known answer (docs/personal-data.md):
// an auditor's own implementation must agree.
TEST(PersonalDataTest, CommitmentKnownAnswer) {
  const std::string salt(32, '\x01');
  EXPECT_EQ(
      absl::BytesToHexString(Commitment("0192f3a4-5b6c-7d8e-9f01-23456789abcd", "new_value.email",
                                        "user-1", salt, "alice@example.com")),
      // Computed apart from this code, with Python's hashlib.
      "3403e3eff56ff7e78414cfa7c0babde9dc81a2c2afc6f74cafa29de13cde1b2f");
}

}  // namespace
}  // namespace ulticode::audit
