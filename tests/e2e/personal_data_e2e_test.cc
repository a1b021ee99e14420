// Personal data end to end (docs/personal-data.md): owners that commit to
// personal values (schema_version 2) publish them beside the envelope;
// Admin keeps them apart from the log, serves them back in place with
// their commitments, refuses to serve a changed one, and after an erasure
// serves the commitment alone while no byte of the value is left in any of
// its tables. The envelope, the leaf and every other field never change.
#include <unistd.h>

#include <filesystem>
#include <random>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/audit/event.h"
#include "common/crypto/crypto.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"
#include "common/redis/stream_id.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/support/mesh.h"
#include "tests/support/mesh_calls.h"
#include "tests/support/pg_query.h"
#include "tests/support/test_env.h"
#include "tests/support/tokens.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"
#include "ulticode/auth/v1/auth.grpc.pb.h"

namespace ulticode {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::ulticode::testing::Mesh;
using ::ulticode::testing::QueryInt;
using ::ulticode::testing::QueryText;
using ::ulticode::testing::Service;
using ::ulticode::testing::WaitFor;
namespace adminv1 = ::ulticode::admin::v1;
using LogValue = adminv1::AuditLog::PersonalValue;

class PersonalDataE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    ULTI_REQUIRE_REDIS(redis);
    testing::MeshOptions options;
    options.prefix = "pdata";
    options.auth_args = options.app_args = {"--personal-data-commitments=true"};
    mesh_ = std::make_unique<Mesh>(pg, redis, options);
    redis_ = redis;
    // Admin reaches the owners for ErasePersonalData as a privacy officer.
    token_file_ =
        absl::StrCat(std::filesystem::temp_directory_path().string(), "/pdata-token-", getpid());
    testing::TokenSpec spec;
    spec.subject = "admin";
    spec.roles = {"privacy.officer"};
    ASSERT_TRUE(crypto::WriteSecretFile(token_file_, testing::SharedTestTokens().Mint(spec)).ok());
    mesh_->AppendArgs(
        Service::kAdmin,
        {"--personal-data-commitments=true",
         absl::StrCat("--owner-operations=auth=127.0.0.1:", mesh_->grpc_port(Service::kAuth, 0),
                      ",app=127.0.0.1:", mesh_->grpc_port(Service::kApp, 0)),
         absl::StrCat("--owner-token-file=", token_file_)});
    std::string error;
    for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
      ASSERT_TRUE(mesh_->Start(s, 0, &error)) << error;
    }
    for (Service s : {Service::kAuth, Service::kApp, Service::kAdmin}) {
      pg::ConnectOptions o;
      o.conninfo = mesh_->Dsn(s);
      auto c = pg::Connection::Connect(o);
      ASSERT_TRUE(c.ok()) << c.status();
      db_[static_cast<int>(s)] = std::move(c).value();
    }
    admin_ = adminv1::AdminService::NewStub(mesh_->Channel(Service::kAdmin, 0));
  }

  void TearDown() override {
    if (!token_file_.empty()) std::filesystem::remove(token_file_);
  }

  pg::Connection& Db(Service s) { return *db_[static_cast<int>(s)]; }

  absl::StatusOr<adminv1::ErasePersonalDataResponse> Erase(const std::string& subject,
                                                           const std::string& role) {
    grpc::ClientContext ctx;
    testing::Authorize(&ctx, "dpo", {role});
    adminv1::ErasePersonalDataRequest req;
    req.set_subject(subject);
    req.set_request_id(testing::RequestIdFor("erase-" + subject));
    adminv1::ErasePersonalDataResponse resp;
    const grpc::Status s = adminv1::AdminOperations::NewStub(mesh_->Channel(Service::kAdmin, 0))
                               ->ErasePersonalData(&ctx, req, &resp);
    if (!s.ok())
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    return resp;
  }

  // A connection to the test Redis as its all-powerful user.
  std::unique_ptr<redis::Client> Redis() {
    redis::Options o;
    o.host = redis_.host;
    o.port = redis_.port;
    o.user = redis_.user;
    o.password = redis_.password;
    return std::make_unique<redis::Client>(o);
  }

  // How many entries of both owner streams hold `needle` in any field.
  int EntriesHolding(const std::string& needle) {
    auto redis = Redis();
    int found = 0;
    for (const std::string& stream : {mesh_->auth_stream(), mesh_->app_stream()}) {
      auto entries = redis->XRead(stream, 100000, absl::ZeroDuration(), "0-0");
      EXPECT_TRUE(entries.ok()) << entries.status();
      for (const auto& e : entries.value_or(std::vector<redis::StreamEntry>{})) {
        for (const auto& [name, value] : e.fields) found += absl::StrContains(value, needle);
      }
    }
    return found;
  }

  absl::StatusOr<adminv1::AuditLog> Get(const std::string& event_id) {
    grpc::ClientContext ctx;
    testing::Authorize(&ctx, "auditor", {"audit.reader"});
    adminv1::GetAuditLogRequest req;
    req.set_event_id(event_id);
    adminv1::AuditLog log;
    const grpc::Status s = admin_->GetAuditLog(&ctx, req, &log);
    if (!s.ok())
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    return log;
  }

  // The tables of `service`'s database where `needle` (ASCII) appears in any
  // column, as text or as the hex of a bytea.
  std::vector<std::string> TablesHolding(Service service, const std::string& needle,
                                         const std::vector<std::string>& except = {}) {
    pg::Statement list{"test.tables",
                       "SELECT table_name::text FROM information_schema.tables"
                       " WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"};
    auto tables = Db(service).Execute(list);
    EXPECT_TRUE(tables.ok()) << tables.status();
    std::vector<std::string> found;
    const std::string hex = absl::BytesToHexString(needle);
    for (int i = 0; tables.ok() && i < tables->rows(); ++i) {
      const std::string table = tables->GetString(i, 0);
      if (std::find(except.begin(), except.end(), table) != except.end()) continue;
      if (QueryInt(Db(service),
                   absl::StrCat("SELECT count(*) FROM \"", table, "\" t WHERE t::text LIKE '%",
                                needle, "%' OR t::text LIKE '%", hex, "%'")) > 0) {
        found.push_back(table);
      }
    }
    return found;
  }

  bool Logged(int n) {
    return QueryInt(Db(Service::kAdmin), "SELECT count(*) FROM log_leaves") == n;
  }

  bool Delivered(int n) {
    return QueryInt(Db(Service::kAdmin), "SELECT count(*) FROM audit_logs") == n;
  }

  std::unique_ptr<Mesh> mesh_;
  testing::RedisEndpoint redis_;
  std::string token_file_;
  std::unique_ptr<pg::Connection> db_[3];
  std::unique_ptr<adminv1::AdminService::Stub> admin_;
};

const LogValue* ValueAt(const adminv1::AuditLog& log, const std::string& path) {
  for (const LogValue& v : log.personal_values()) {
    if (v.path() == path) return &v;
  }
  return nullptr;
}

TEST_F(PersonalDataE2ETest, ValuesAreServedInPlaceKeptApartAndErasedWithoutTouchingTheLog) {
  std::mt19937 rng(std::random_device{}());
  const std::string tag = absl::StrCat(std::uniform_int_distribution<uint32_t>()(rng));
  // Two data subjects, and a problem (its actor's call data is personal too).
  const std::string erased_name = absl::StrCat("pdgone", tag),
                    kept_name = absl::StrCat("pdkept", tag);
  auto erased_event = testing::CreateUser(*mesh_, erased_name);
  auto kept_event = testing::CreateUser(*mesh_, kept_name);
  auto problem_event = testing::CreateProblem(*mesh_, 1);
  ASSERT_TRUE(erased_event.ok() && kept_event.ok() && problem_event.ok());
  ASSERT_TRUE(WaitFor([&] { return Delivered(3) && Logged(3); }, std::chrono::seconds(30)))
      << mesh_->Output(Service::kAdmin, 0) << mesh_->Output(Service::kAuth, 0);

  // Served in place, each with its commitment.
  auto erased = Get(*erased_event);
  ASSERT_TRUE(erased.ok()) << erased.status();
  EXPECT_EQ(erased->new_value().fields().at("email").string_value(), erased_name + "@example.com");
  EXPECT_EQ(erased->new_value().fields().at("username").string_value(), erased_name);
  EXPECT_FALSE(erased->client_ip().empty());
  EXPECT_FALSE(erased->user_agent().empty());
  std::vector<std::string> paths;
  for (const LogValue& v : erased->personal_values()) {
    paths.push_back(v.path());
    EXPECT_EQ(v.state(), LogValue::STATE_PRESENT) << v.path();
    EXPECT_EQ(v.commitment().size(), 32u) << v.path();
  }
  EXPECT_THAT(paths, ElementsAre("client_ip", "new_value.display_name", "new_value.email",
                                 "new_value.username", "user_agent"));
  const std::string user_id = erased->subject();
  EXPECT_EQ(ValueAt(*erased, "new_value.email")->subject(), user_id);
  EXPECT_EQ(ValueAt(*erased, "client_ip")->subject(), erased->actor());
  auto problem = Get(*problem_event);
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_EQ(problem->personal_values_size(), 2);  // the caller's address and agent

  // Apart from the log: no envelope, leaf, inbox row or stream entry holds
  // them, only Admin's personal_values and the owner's outbox values.
  for (const std::string& name : {erased_name, kept_name}) {
    EXPECT_THAT(TablesHolding(Service::kAdmin, name), ElementsAre("personal_values")) << name;
    EXPECT_THAT(TablesHolding(Service::kAuth, name, {"users"}),
                ElementsAre("audit_outbox_personal"))
        << name;
  }

  // A kept value changed in Admin's database is refused as it is written
  // (its row's commitment no longer opens), and one changed behind the
  // database's back (a superuser with triggers off) is never served.
  EXPECT_FALSE(Db(Service::kAdmin)
                   .ExecuteScript("change",
                                  absl::StrCat("UPDATE personal_values SET value = 'x' WHERE "
                                               "event_id = '",
                                               *kept_event, "' AND path = 'new_value.email'"),
                                  absl::Seconds(10))
                   .ok());
  ASSERT_TRUE(Db(Service::kAdmin)
                  .ExecuteScript("off", "SET session_replication_role = replica", absl::Seconds(10))
                  .ok());
  const std::string leaf_before =
      QueryText(Db(Service::kAdmin),
                absl::StrCat("SELECT encode(envelope, 'hex') FROM audit_logs WHERE event_id = '",
                             *kept_event, "'"));
  ASSERT_EQ(
      QueryInt(Db(Service::kAdmin),
               absl::StrCat("WITH u AS (UPDATE personal_values SET value = 'mallory@example.org'"
                            " WHERE event_id = '",
                            *kept_event,
                            "' AND path = 'new_value.email' RETURNING 1) SELECT count(*) FROM u")),
      1);
  auto changed = Get(*kept_event);
  EXPECT_EQ(changed.status().code(), absl::StatusCode::kDataLoss) << changed.status();
  EXPECT_THAT(changed.status().message(), HasSubstr("new_value.email"));
  ASSERT_EQ(
      QueryInt(Db(Service::kAdmin),
               absl::StrCat("WITH u AS (UPDATE personal_values SET value = '", kept_name,
                            "@example.com' WHERE event_id = '", *kept_event,
                            "' AND path = 'new_value.email' RETURNING 1) SELECT count(*) FROM u")),
      1);
  ASSERT_TRUE(Db(Service::kAdmin)
                  .ExecuteScript("on", "SET session_replication_role = origin", absl::Seconds(10))
                  .ok());
  ASSERT_TRUE(Get(*kept_event).ok());

  // Erased on Admin: the commitments stay, the values go, nothing else
  // about the event changes.
  auto report = Erase(user_id, "privacy.officer");
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->values_erased(), 3);
  auto after = Get(*erased_event);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_FALSE(after->new_value().fields().contains("email"));
  EXPECT_EQ(ValueAt(*after, "new_value.email")->state(), LogValue::STATE_ERASED);
  EXPECT_EQ(ValueAt(*after, "new_value.email")->commitment(),
            ValueAt(*erased, "new_value.email")->commitment());
  EXPECT_TRUE(ValueAt(*after, "new_value.email")->value().empty());
  EXPECT_EQ(ValueAt(*after, "client_ip")->state(), LogValue::STATE_PRESENT);
  // Everything else is as before: the record as served before, without
  // the erased values.
  adminv1::AuditLog expected = *erased;
  for (const LogValue& v : after->personal_values()) {
    if (v.state() != LogValue::STATE_ERASED) continue;
    ASSERT_TRUE(absl::StartsWith(v.path(), "new_value.")) << v.path();
    expected.mutable_new_value()->mutable_fields()->erase(v.path().substr(10));
  }
  adminv1::AuditLog served = *after;
  expected.clear_personal_values();
  served.clear_personal_values();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(served, expected))
      << served.DebugString() << "\nexpected\n"
      << expected.DebugString();
  EXPECT_THAT(TablesHolding(Service::kAdmin, erased_name), IsEmpty());
  EXPECT_THAT(TablesHolding(Service::kAdmin, kept_name), ElementsAre("personal_values"));
  EXPECT_EQ(
      QueryText(Db(Service::kAdmin),
                absl::StrCat("SELECT encode(envelope, 'hex') FROM audit_logs WHERE event_id = '",
                             *kept_event, "'")),
      leaf_before);
  EXPECT_EQ(
      QueryInt(Db(Service::kAdmin),
               absl::StrCat("SELECT count(*) FROM personal_erasures WHERE subject = '", user_id,
                            "' AND values_erased = 3 AND event_id = '", report->event_id(), "'")),
      1);
}

// What each runtime login can do to personal data, as that login: erase
// without the privacy officer (refused at commit: no erasure without its
// record in the log), erase an empty subject (refused at Admin and at the
// owner, whose kept responses all stay), write an erased value back (under
// its subject: refused; under another: never read), or plant a value for
// an event (under the envelope's commitment: refused; under another: the
// true value is still stored beside it and served).
TEST_F(PersonalDataE2ETest, OnlyTheOfficerErasesAndNoRuntimeLoginUndoesOrBlocksIt) {
  const std::string tag = testing::RandomSuffix();
  auto gone = testing::CreateUser(*mesh_, "rtgone" + tag);
  auto kept = testing::CreateUser(*mesh_, "rtkept" + tag);
  ASSERT_TRUE(gone.ok() && kept.ok());
  ASSERT_TRUE(WaitFor([&] { return Delivered(2) && Logged(2); }, std::chrono::seconds(30)));
  auto before = Get(*gone);
  ASSERT_TRUE(before.ok()) << before.status();
  const std::string subject = before->subject();
  auto runtime = [&](Service s) {
    pg::ConnectOptions o;
    const std::string dsn = mesh_->Dsn(s);
    o.conninfo = dsn.substr(0, dsn.find(" user=")) + dsn.substr(dsn.find(" dbname="));
    o.user = mesh_->RuntimeRole(s);
    o.password = mesh_->RuntimePassword(s);
    return pg::Connection::Connect(o).value();
  };
  auto admin = runtime(Service::kAdmin);
  auto auth = runtime(Service::kAuth);

  // Erasing without the officer: the erasure has no record, and its
  // transaction does not commit.
  for (const std::string& sql :
       {absl::StrCat("SELECT erase_personal_data('", subject, "', now(), 'me', gen_random_uuid())"),
        absl::StrCat("SELECT erase_personal_data('", subject, "', now(), 'me', '", *kept, "')")}) {
    const absl::Status s = admin->ExecuteScript("erase", sql, absl::Seconds(10));
    EXPECT_FALSE(s.ok()) << sql;
  }
  auto still = Get(*gone);
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_EQ(ValueAt(*still, "new_value.email")->state(), LogValue::STATE_PRESENT);

  // An empty or malformed subject, at Admin and at the owner.
  const int64_t keys = QueryInt(Db(Service::kAuth), "SELECT count(*) FROM idempotency_keys");
  for (const char* bad : {"", " ", "a b", "x\n"}) {
    EXPECT_FALSE(admin
                     ->ExecuteScript("erase",
                                     absl::StrCat("SELECT erase_personal_data(E'", bad,
                                                  "', now(), 'me', gen_random_uuid())"),
                                     absl::Seconds(10))
                     .ok())
        << "Admin, subject \"" << bad << "\"";
    EXPECT_FALSE(
        auth->ExecuteScript("erase",
                            absl::StrCat("SELECT erase_personal_data(E'", bad, "', now(), 'me')"),
                            absl::Seconds(10))
            .ok())
        << "owner, subject \"" << bad << "\"";
  }
  EXPECT_EQ(QueryInt(Db(Service::kAuth), "SELECT count(*) FROM idempotency_keys"), keys);

  // Planting: under the envelope's commitment (a value that does not open
  // it) refused; under one of its own, stored beside the true value, which
  // is what is served.
  const std::string email_commitment =
      absl::BytesToHexString(ValueAt(*before, "new_value.email")->commitment());
  const std::string plant = absl::StrCat(
      "INSERT INTO personal_values (event_id, path, subject, value, salt, commitment, occurred_at)"
      " SELECT '",
      *kept, "', 'new_value.email', '", subject, "', 'mallory@example.org', s, ");
  const std::string from =
      absl::StrCat(", now() FROM (SELECT decode(repeat('ab', 32), 'hex') AS s) x");
  EXPECT_FALSE(admin
                   ->ExecuteScript("plant", plant + "'\\x" + email_commitment + "'::bytea" + from,
                                   absl::Seconds(10))
                   .ok());
  EXPECT_TRUE(admin
                  ->ExecuteScript("plant",
                                  plant + "personal_commitment('" + *kept +
                                      "', 'new_value.email', '" + subject +
                                      "', s, 'mallory@example.org')" + from,
                                  absl::Seconds(10))
                  .ok());
  auto served = Get(*kept);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(ValueAt(*served, "new_value.email")->state(), LogValue::STATE_PRESENT);
  EXPECT_EQ(served->new_value().fields().at("email").string_value(),
            "rtkept" + tag + "@example.com");

  // The officer erases; the value cannot come back under its subject, and
  // one written under another subject is never read as the event's.
  auto report = Erase(subject, "privacy.officer");
  ASSERT_TRUE(report.ok()) << report.status();
  const std::string value = "rtgone" + tag + "@example.com";
  const std::string salt = absl::BytesToHexString(ValueAt(*before, "new_value.email")->salt());
  for (const auto& [who, when] : {std::pair{subject, "now() - interval '1 hour'"},
                                  std::pair{subject, "now() + interval '1 day'"},
                                  std::pair{std::string("someone-else"), "now()"}}) {
    (void)admin->ExecuteScript(
        "write back",
        absl::StrCat("INSERT INTO personal_values (event_id, path, subject, value, salt,"
                     " commitment, occurred_at) SELECT '",
                     *gone, "', 'new_value.email', '", who, "', '", value, "', decode('", salt,
                     "', 'hex'), personal_commitment('", *gone, "', 'new_value.email', '", who,
                     "', decode('", salt, "', 'hex'), '", value, "'), ", when),
        absl::Seconds(10));
  }
  EXPECT_EQ(QueryInt(Db(Service::kAdmin),
                     absl::StrCat("SELECT count(*) FROM personal_values WHERE subject = '", subject,
                                  "'")),
            0);
  auto after = Get(*gone);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(ValueAt(*after, "new_value.email")->state(), LogValue::STATE_ERASED);
  EXPECT_FALSE(after->new_value().fields().contains("email"));
}

// ErasePersonalData as a privacy officer would call it, with one of the
// subject's events delivered, one still in the stream (Admin cannot read
// it: its Redis user lost XREADGROUP for the while) and every one in its
// owner's outbox: afterwards no byte of the subject's values is in any
// table of any service or in any stream, the event in flight arrives
// without them, the other subject's are intact, and the erasure is in the
// log, at the owner and at Admin.
TEST_F(PersonalDataE2ETest, ErasureReachesTheOwnersTheStreamsAndAdmin) {
  std::mt19937 rng(std::random_device{}());
  const std::string tag = absl::StrCat(std::uniform_int_distribution<uint32_t>()(rng));
  const std::string gone = absl::StrCat("pdgone", tag), kept = absl::StrCat("pdkept", tag);
  auto delivered = testing::CreateUser(*mesh_, gone);
  ASSERT_TRUE(delivered.ok()) << delivered.status();
  ASSERT_TRUE(WaitFor([&] { return Delivered(1); }, std::chrono::seconds(30)));
  auto first = Get(*delivered);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string subject = first->subject();

  // Admin stops reading the streams; the next events wait in them.
  auto redis = Redis();
  const std::string admin_user = mesh_->RedisUser(Service::kAdmin);
  ASSERT_TRUE(redis->Command({"ACL", "SETUSER", admin_user, "-xreadgroup"}).ok());
  // A read already blocked would still return entries: end Admin's
  // connections, so that every read from now on is refused.
  ASSERT_TRUE(redis->Command({"CLIENT", "KILL", "USER", admin_user}).ok());
  // The same subject again (disabled, with a reason that names them), and
  // another subject.
  std::string in_flight;
  {
    grpc::ClientContext ctx;
    testing::Authorize(&ctx, "alice", {"auth.admin"});
    auth::v1::DisableUserRequest req;
    req.set_user_id(subject);
    req.set_reason(absl::StrCat(gone, " asked to leave"));
    auth::v1::DisableUserResponse resp;
    ASSERT_TRUE(auth::v1::AuthService::NewStub(mesh_->Channel(Service::kAuth, 0))
                    ->DisableUser(&ctx, req, &resp)
                    .ok());
    in_flight = resp.event_id();
  }
  auto other = testing::CreateUser(*mesh_, kept);
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(WaitFor([&] { return EntriesHolding(gone) == 2; }, std::chrono::seconds(30)));
  // The entry in flight as it is now: a Redis restored from a backup taken
  // before the erasure would bring it back.
  redis::StreamFields old_entry;
  {
    auto entries = redis->XRead(mesh_->auth_stream(), 100000, absl::ZeroDuration(), "0-0");
    ASSERT_TRUE(entries.ok()) << entries.status();
    for (const auto& e : *entries) {
      for (const auto& [name, value] : e.fields) {
        if (name == audit::kPersonalField && absl::StrContains(value, gone)) old_entry = e.fields;
      }
    }
    ASSERT_FALSE(old_entry.empty());
  }

  // Only a privacy officer may erase.
  EXPECT_EQ(Erase(subject, "audit.operator").status().code(), absl::StatusCode::kPermissionDenied);
  auto report = Erase(subject, "privacy.officer");
  ASSERT_TRUE(report.ok()) << report.status() << mesh_->Output(Service::kAdmin, 0);
  EXPECT_EQ(report->subject(), subject);
  ASSERT_EQ(report->owners_size(), 2);
  EXPECT_EQ(report->owners(0).owner(), audit::v1::OWNER_AUTH);
  EXPECT_EQ(report->owners(0).values_erased(), 4);  // 3 names, the reason
  EXPECT_EQ(report->owners(0).stream_entries_removed(), 2);
  EXPECT_EQ(report->owners(1).values_erased(), 0);
  EXPECT_EQ(report->values_erased(), 3);  // the reason is not here yet
  EXPECT_FALSE(report->event_id().empty());
  // A repeat answers with the first report.
  auto repeat = Erase(subject, "privacy.officer");
  ASSERT_TRUE(repeat.ok()) << repeat.status();
  EXPECT_EQ(repeat->event_id(), report->event_id());
  EXPECT_EQ(EntriesHolding(gone), 0);

  // Admin reads again: the event in flight arrives, without the values.
  ASSERT_TRUE(redis->Command({"ACL", "SETUSER", admin_user, "+xreadgroup"}).ok());
  ASSERT_TRUE(WaitFor([&] { return Delivered(6); }, std::chrono::seconds(30)))
      << mesh_->Output(Service::kAdmin, 0);  // 3 users, 3 erasure records
  for (const std::string& id : {*delivered}) {
    auto log = Get(id);
    ASSERT_TRUE(log.ok()) << log.status();
    EXPECT_EQ(ValueAt(*log, "new_value.email")->state(), LogValue::STATE_ERASED);
    EXPECT_EQ(ValueAt(*log, "client_ip")->state(), LogValue::STATE_PRESENT);  // alice's
  }
  auto late = Get(in_flight);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(ValueAt(*late, "new_value.reason")->state(), LogValue::STATE_ERASED);
  EXPECT_EQ(late->new_value().fields().at("status").string_value(), "DISABLED");
  auto intact = Get(*other);
  ASSERT_TRUE(intact.ok()) << intact.status();
  EXPECT_EQ(intact->new_value().fields().at("email").string_value(), kept + "@example.com");

  // No byte left anywhere but in the owner's own business table.
  EXPECT_THAT(TablesHolding(Service::kAdmin, gone), IsEmpty());
  EXPECT_THAT(TablesHolding(Service::kAuth, gone, {"users"}), IsEmpty());
  EXPECT_THAT(TablesHolding(Service::kApp, gone), IsEmpty());
  EXPECT_EQ(EntriesHolding(gone), 0);
  EXPECT_THAT(TablesHolding(Service::kAdmin, kept), ElementsAre("personal_values"));

  // The old entry comes back (a Redis backup restored): Admin takes its
  // event again, but not the erased values.
  auto back = redis->XAddBatch(mesh_->auth_stream(), {old_entry});
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto groups = redis->XInfoGroups(mesh_->auth_stream());
        return groups.ok() && !groups->empty() && (*groups)[0].pending == 0 &&
               !redis::StreamIdLess((*groups)[0].last_delivered_id, (*back)[0]);
      },
      std::chrono::seconds(30)));
  EXPECT_THAT(TablesHolding(Service::kAdmin, gone), IsEmpty());
  ASSERT_TRUE(redis->Command({"XDEL", mesh_->auth_stream(), (*back)[0]}).ok());

  // The erasure is in the log twice: the owner's and Admin's record.
  for (const char* type :
       {"admin.personal_data.erased", "auth.personal_data.erased", "app.personal_data.erased"}) {
    EXPECT_EQ(
        QueryInt(Db(Service::kAdmin),
                 absl::StrCat("SELECT count(*) FROM audit_logs WHERE event_type = '", type,
                              "' AND subject = '", subject, "' AND actor IN ('dpo', 'admin')")),
        1)
        << type;
  }

  // An export of the whole log holds none of the erased values.
  {
    grpc::ClientContext ctx;
    testing::Authorize(&ctx, "auditor", {"audit.reader"});
    adminv1::ExportAuditLogsRequest req;
    req.set_format(adminv1::EXPORT_FORMAT_JSONL);
    req.set_with_proofs(true);
    auto reader = admin_->ExportAuditLogs(&ctx, req);
    adminv1::ExportAuditLogsResponse frame;
    std::string all;
    int rows = 0;
    while (reader->Read(&frame)) {
      for (const auto& row : frame.chunk().rows()) {
        all += row.text() + row.SerializeAsString();
        ++rows;
      }
    }
    ASSERT_TRUE(reader->Finish().ok());
    // As of the newest cosigned checkpoint: at least the first user's row.
    EXPECT_GE(rows, 1);
    EXPECT_TRUE(absl::StrContains(all, *delivered));
    EXPECT_FALSE(absl::StrContains(all, gone));
  }

  // A subject with events at both owners: alice, whose calls' address and
  // agent every event of this test holds.
  auto problem = testing::CreateProblem(*mesh_, 7);
  ASSERT_TRUE(problem.ok()) << problem.status();
  ASSERT_TRUE(WaitFor([&] { return Get(*problem).ok(); }, std::chrono::seconds(30)));
  auto alice = Erase("alice", "privacy.officer");
  ASSERT_TRUE(alice.ok()) << alice.status();
  ASSERT_EQ(alice->owners_size(), 2);
  EXPECT_GT(alice->owners(0).values_erased(), 0);
  EXPECT_EQ(alice->owners(1).values_erased(), 2);  // the problem's call
  EXPECT_GT(alice->values_erased(), 0);
  for (const std::string& id : {*problem, *other}) {
    auto log = Get(id);
    ASSERT_TRUE(log.ok()) << log.status();
    EXPECT_EQ(ValueAt(*log, "client_ip")->state(), LogValue::STATE_ERASED) << id;
    EXPECT_TRUE(log->client_ip().empty()) << id;
  }
  EXPECT_EQ(
      QueryInt(Db(Service::kAdmin), "SELECT count(*) FROM personal_values WHERE subject = 'alice'"),
      0);
  for (Service s : {Service::kAuth, Service::kApp}) {
    EXPECT_EQ(QueryInt(Db(s), "SELECT count(*) FROM audit_outbox_personal WHERE subject = 'alice'"),
              0);
  }
}

}  // namespace
}  // namespace ulticode
