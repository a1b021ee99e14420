// The invariant of a true record: every request an owner commits produces
// exactly one row in audit_logs. Seeded random, adversarial but schema-valid
// requests for every mutating RPC of Auth and App go over real gRPC through
// validation, the business transaction and event building, and every event
// they commit then goes through the real Admin write path (entry validation
// with seal check, consumer_inbox insert, lease consumer, audit_logs) on
// real PostgreSQL. An accepted request whose audit row is missing, a refused
// request that wrote anything, a stored string that differs from the one
// sent, or an INTERNAL/UNKNOWN answer fails the test.
//
// ULTICODE_HOSTILE_SEED reproduces a run; ULTICODE_HOSTILE_REQUESTS sets the
// requests per service (default 400).
#include <cstdlib>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "admin/consumer/lease_consumer.h"
#include "admin/inbox/entry_validation.h"
#include "admin/inbox/inbox_store.h"
#include "admin/migrations.h"
#include "app/app_service.h"
#include "app/migrations.h"
#include "auth/auth_service.h"
#include "auth/migrations.h"
#include "common/ids/uuid.h"
#include "common/migrations/migrations.h"
#include "common/seal/seal.h"
#include "common/server/error_details.h"
#include "common/text/text.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "owner/outbox/outbox_store.h"
#include "tests/support/keys.h"
#include "tests/support/owner_service_fixture.h"
#include "tests/support/pg_query.h"

namespace ulticode {

namespace {

using google::protobuf::util::TimeUtil;

// Pieces that broke or could break records: NUL (libpq cuts at it, jsonb
// refuses \u0000), C0/C1 controls, bidi overrides and invisible characters,
// quotes and escapes for SQL/JSON/array literals, and ordinary text in
// several scripts. All valid UTF-8: proto3 strings cannot carry anything else
// (gRPC refuses to serialize or parse it); text::Check's own UTF-8 checks
// are covered by text_test.
const std::vector<std::string> kPieces = {
    "",
    "a",
    "Z",
    "0",
    "_",
    "-",
    ".",
    "@",
    " ",
    std::string("\0", 1),
    "\x01",
    "\x1b[2J",
    "\x7f",
    "\n",
    "\t",
    "\r",
    "\xc2\x85",
    "\xc2\x9f",
    "\xe2\x80\xae",  // NEL, APC, RLO
    "\xe2\x81\xa6",
    "\xe2\x80\x8b",
    "\xef\xbb\xbf",  // LRI, ZWSP, BOM
    "\xc3\xa9",
    "\xe6\xbc\xa2\xe5\xad\x97",
    "\xf0\x9f\x8f\x86",  // é 漢字 🏆
    "\xd9\x85\xd8\xb1",
    "\xcc\x81",  // Arabic, combining
    "\\u0000",
    "\\",
    "\"",
    "'",
    "{}",
    "{\"a\":1}",
    ",",
    "NULL",
    "%s%n",
    "'; DROP TABLE users; --",
    "<script>",
    "${jndi:x}",
    "a@b.co",
};

// The characters no stored string may hold (or, in names, show).
const std::vector<std::string> kHostile = {
    std::string("\0", 1), "\x01",        "\x1b",         "\x7f",         "\r",
    "\xc2\x85",           "\xc2\x9f",    "\xe2\x80\xae", "\xe2\x81\xa6", "\xe2\x80\x8b",
    "\xef\xbb\xbf",       "\xe2\x80\x8f"};

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(int percent) { return Int(1, 100) <= percent; }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(Int(0, static_cast<int>(v.size()) - 1))];
  }

  // A string of pieces, a third of them with a control, bidi or invisible
  // character, sometimes stretched to just around a length limit.
  std::string Text() {
    std::vector<std::string> pieces;
    for (int i = Int(0, 6); i > 0; --i) pieces.push_back(Pick(kPieces));
    if (Chance(35)) {
      pieces.insert(pieces.begin() + Int(0, static_cast<int>(pieces.size())), Pick(kHostile));
    }
    std::string s;
    for (const std::string& p : pieces) s += p;
    if (Chance(10)) {
      const int target = Pick(
          std::vector<int>{31, 32, 33, 127, 128, 129, 199, 200, 201, 253, 254, 255, 511, 512, 513});
      const std::string unit = Chance(50) ? "x" : "\xc3\xa9";
      while (static_cast<int>(text::CodePoints(s)) < target) s += unit;
    }
    return s;
  }
  // Mostly well-formed, sometimes hostile.
  std::string Name(const std::string& good) { return Chance(60) ? good : Text(); }
  std::string Id(const std::vector<std::string>& known) {
    if (!known.empty() && Chance(70)) return Pick(known);
    return Chance(50) ? ids::NewUuidV7() : Text();
  }
  std::string RequestId() { return Chance(70) ? "" : Name(ids::NewUuidV7()); }

 private:
  std::mt19937_64 rng_;
};

uint64_t Seed() {
  if (const char* s = std::getenv("ULTICODE_HOSTILE_SEED")) return std::strtoull(s, nullptr, 10);
  return std::random_device{}();
}

int RequestsPerService() {
  if (const char* s = std::getenv("ULTICODE_HOSTILE_REQUESTS")) return std::atoi(s);
  return 400;
}

// What a call did: its status and, when it changed something, its event.
struct Outcome {
  grpc::Status status;
  std::string event_id;
  std::string what;
};

// Admin's side: a scratch database with Admin's schema, fed with the
// owner's outbox rows exactly as the dispatcher publishes them.
class AdminSink {
 public:
  void Start(const testing::PgEndpoint& pg) {
    options_.pg.conninfo = pg.ConnInfo(testing::CreateScratchDatabase(pg, "hostileadmin"));
    auto conn = pg::Connection::Connect(options_.pg);
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = std::move(conn).value();
    ASSERT_TRUE(migrations::Apply(*conn_, admin::Migrations()).ok());
    options_.retry_backoff = {absl::Milliseconds(1), absl::Milliseconds(1)};
  }

  // Takes every outbox row of `owner_conn` through entry validation (with
  // the seal check), the inbox and the lease consumer.
  void Drain(pg::Connection& owner_conn, audit::Owner owner) {
    pg::Statement rows{"rows", "SELECT payload, mac, key_id FROM audit_outbox ORDER BY event_id"};
    auto r = owner_conn.Execute(rows);
    ASSERT_TRUE(r.ok()) << r.status();
    const crypto::SigningKey& key = keys_.owner(audit::OwnerName(owner));
    // Each row carries the MAC the dispatcher checks; sealed as one bundle,
    // as a dispatcher cycle does.
    std::vector<std::string> payloads;
    for (int i = 0; i < r->rows(); ++i) {
      payloads.push_back(r->GetBytes(i, 0));
      EXPECT_EQ(r->GetString(i, 2), key.key_id());
      EXPECT_EQ(r->GetBytes(i, 1), outbox::RowMac(key, payloads.back()).value())
          << "the row's MAC is not its payload's";
    }
    const std::vector<absl::string_view> views(payloads.begin(), payloads.end());
    const std::vector<std::string> seals = seal::SealBundle(key, views).value();
    seal::Verifier verifier;
    std::vector<admin::inbox::Arrival> arrivals;
    for (size_t i = 0; i < payloads.size(); ++i) {
      redis::StreamEntry entry;
      entry.id = absl::StrCat(i + 1, "-0");
      entry.fields = {{audit::kEnvelopeField, payloads[i]},
                      {audit::kSealField, seals[i]},
                      {audit::kKeyIdField, key.key_id()}};
      auto verdict =
          admin::inbox::ValidateEntry(owner, entry, absl::Now(), keys_.directory(), verifier);
      if (auto* bad = std::get_if<admin::inbox::Rejection>(&verdict)) {
        ADD_FAILURE() << "Admin refused an event the owner committed: "
                      << admin::inbox::PoisonReasonName(bad->reason) << ": " << bad->detail;
        continue;
      }
      arrivals.push_back({audit::StreamFor(owner), entry.id,
                          std::get<admin::inbox::AcceptedEntry>(std::move(verdict))});
    }
    auto tx = conn_->Begin();
    ASSERT_TRUE(tx.ok());
    auto taken =
        admin::inbox::InsertIfAbsent(*tx, "audit_logs", arrivals, admin::inbox::InsertAs::kPending);
    ASSERT_TRUE(taken.ok()) << taken.status();
    ASSERT_TRUE(tx->Commit().ok());
    auto metrics = metrics::Metrics::Unexposed("sink");
    admin::consumer::LeaseConsumer consumer(options_, metrics->registry());
    for (int round = 0; round < 1000; ++round) {
      auto cycle = consumer.RunOnce(*conn_, "sink");
      ASSERT_TRUE(cycle.ok()) << cycle.status();
      if (testing::QueryInt(*conn_,
                            "SELECT count(*) FROM consumer_inbox WHERE status IN "
                            "('PENDING', 'PROCESSING')") == 0) {
        break;
      }
    }
  }

  int64_t Scalar(const std::string& sql) { return testing::QueryInt(*conn_, sql); }
  // The stored actor of `event_id`, or "<missing>".
  std::string Actor(const std::string& event_id) {
    return testing::QueryText(*conn_,
                              "SELECT coalesce(max(actor), '<missing>') FROM audit_logs"
                              " WHERE event_id = '" +
                                  event_id + "'");
  }
  const testing::TestKeys& keys() const { return keys_; }

 private:
  const testing::TestKeys& keys_ = testing::SharedTestKeys();
  admin::consumer::ConsumerOptions options_;
  std::unique_ptr<pg::Connection> conn_;
};

// Checks the outcome of every call, then the invariant end to end.
void CheckInvariant(pg::Connection& owner_conn, AdminSink& sink, audit::Owner owner,
                    const std::vector<Outcome>& outcomes, uint64_t seed) {
  std::set<std::string> committed;
  int refused = 0;
  const std::string service = owner == audit::v1::OWNER_AUTH
                                  ? auth::v1::AuthService::service_full_name()
                                  : app::v1::AppService::service_full_name();
  for (const Outcome& o : outcomes) {
    const auto code = o.status.error_code();
    EXPECT_NE(code, grpc::StatusCode::INTERNAL) << o.what << ": " << o.status.error_message();
    EXPECT_NE(code, grpc::StatusCode::UNKNOWN) << o.what << ": " << o.status.error_message();
    if (!o.status.ok()) ++refused;
    // A refusal says why in google.rpc details, and a bad field by its path
    // in the request: a client can tell what to fix.
    if (!o.status.ok()) {
      const server::ErrorDetails d = server::ErrorDetails::Of(o.status);
      EXPECT_TRUE(d.error_info.has_value()) << o.what << ": " << o.status.error_message();
      if (code == grpc::StatusCode::INVALID_ARGUMENT) {
        const google::protobuf::MethodDescriptor* method =
            google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(
                absl::StrCat(service, ".", o.what));
        ASSERT_NE(method, nullptr) << o.what;
        EXPECT_TRUE(d.BadFieldIsIn(method->input_type()))
            << o.what << ": BadRequest field \"" << d.BadField() << "\" ("
            << o.status.error_message() << ")";
      }
    }
    if (!o.event_id.empty()) committed.insert(o.event_id);
  }
  EXPECT_EQ(testing::QueryInt(owner_conn, "SELECT count(*) FROM audit_outbox"),
            static_cast<int64_t>(committed.size()))
      << "exactly one outbox row per committed change (seed " << seed << ")";
  sink.Drain(owner_conn, owner);
  EXPECT_EQ(sink.Scalar("SELECT count(*) FROM audit_logs"), static_cast<int64_t>(committed.size()))
      << "seed " << seed;
  EXPECT_EQ(sink.Scalar("SELECT count(*) FROM consumer_inbox WHERE status = 'DEAD'"), 0)
      << "seed " << seed;
  for (const std::string& id : committed) {
    EXPECT_EQ(sink.Actor(id), "fuzzer") << "no audit row for committed event " << id;
  }
  std::printf("[hostile] %s seed=%llu requests=%zu committed=%zu refused=%d audit_rows=%lld\n",
              audit::OwnerName(owner).c_str(), static_cast<unsigned long long>(seed),
              outcomes.size(), committed.size(), refused,
              static_cast<long long>(sink.Scalar("SELECT count(*) FROM audit_logs")));
  // Coverage, not luck: any seed commits a few dozen and refuses many more.
  EXPECT_GT(committed.size(), outcomes.size() / 20) << "the generator must reach commits";
  EXPECT_GT(refused, static_cast<int>(outcomes.size() / 10)) << "and refusals";
}

class AuthHostileTest
    : public testing::OwnerServiceTest<auth::AuthServiceImpl, auth::v1::AuthService> {
 protected:
  void SetUp() override {
    StartOwner(auth::Migrations(), "ulticode.auth.v1.AuthService", "hostileauth",
               auth::AccessRules());
    if (HasFatalFailure() || IsSkipped()) return;
    ULTI_REQUIRE_PG(pg);
    sink_.Start(pg);
  }
  AdminSink sink_;
};

TEST_F(AuthHostileTest, EveryAcceptedRequestLandsInAuditLogsAndNoStringIsBent) {
  const uint64_t seed = Seed();
  std::printf("[hostile] auth seed=%llu\n", static_cast<unsigned long long>(seed));
  Generator g(seed);
  std::vector<std::string> users;
  const std::vector<std::string> roles = {"admin", "judge", "contestant", "problem_setter"};
  std::vector<Outcome> out;
  for (int i = 0; i < RequestsPerService(); ++i) {
    Outcome o;
    auto ctx = Ctx("fuzzer");
    switch (g.Int(0, 4)) {
      case 0: {
        auth::v1::CreateUserRequest req;
        req.set_username(g.Name(absl::StrCat("user", i)));
        req.set_email(g.Name(absl::StrCat("u", i, "@example.com")));
        req.set_display_name(g.Chance(50) ? g.Text() : absl::StrCat("U ", i));
        req.set_request_id(g.RequestId());
        auth::v1::CreateUserResponse r;
        o.status = stub_->CreateUser(ctx.get(), req, &r);
        o.what = "CreateUser";
        if (o.status.ok() && r.changed()) {
          users.push_back(r.user().user_id());
          const std::string shown =
              req.display_name().empty() ? req.username() : req.display_name();
          EXPECT_EQ(testing::QueryText(*conn_, "SELECT display_name FROM users WHERE user_id = '" +
                                                   r.user().user_id() + "'"),
                    shown)
              << "stored exactly as sent";
          o.event_id = r.event_id();
        }
        break;
      }
      case 1: {
        auth::v1::DisableUserRequest req;
        req.set_user_id(g.Id(users));
        req.set_reason(g.Chance(30) ? "left the company" : g.Text());
        req.set_request_id(g.RequestId());
        auth::v1::DisableUserResponse r;
        o.status = stub_->DisableUser(ctx.get(), req, &r);
        o.what = "DisableUser";
        if (o.status.ok() && r.changed()) {
          EXPECT_EQ(testing::QueryText(*conn_,
                                       "SELECT disabled_reason FROM users WHERE "
                                       "user_id = '" +
                                           req.user_id() + "'"),
                    req.reason())
              << "a reason is never silently cut";
          o.event_id = r.event_id();
        }
        break;
      }
      case 2:
      case 3: {
        const bool assign = g.Chance(60);
        const std::string user = g.Id(users);
        const std::string role = g.Name(g.Pick(roles));
        const std::string rid = g.RequestId();
        if (assign) {
          auth::v1::AssignRoleRequest req;
          req.set_user_id(user);
          req.set_role(role);
          req.set_request_id(rid);
          auth::v1::AssignRoleResponse r;
          o.status = stub_->AssignRole(ctx.get(), req, &r);
          if (o.status.ok() && r.changed()) o.event_id = r.event_id();
        } else {
          auth::v1::RevokeRoleRequest req;
          req.set_user_id(user);
          req.set_role(role);
          req.set_request_id(rid);
          auth::v1::RevokeRoleResponse r;
          o.status = stub_->RevokeRole(ctx.get(), req, &r);
          if (o.status.ok() && r.changed()) o.event_id = r.event_id();
        }
        o.what = assign ? "AssignRole" : "RevokeRole";
        break;
      }
      default: {
        auth::v1::UpdateLoginPolicyRequest req;
        auto* p = req.mutable_login_policy();
        p->set_min_password_length(g.Int(6, 130));
        p->set_lockout_threshold(g.Int(0, 101));
        p->set_mfa_required(g.Chance(50));
        p->mutable_session_lifetime()->set_seconds(g.Int(50, 2592001));
        // Any subset of the four paths, sometimes none (refused).
        for (const char* path :
             {"min_password_length", "lockout_threshold", "mfa_required", "session_lifetime"}) {
          if (g.Chance(70)) req.mutable_update_mask()->add_paths(path);
        }
        req.set_request_id(g.RequestId());
        auth::v1::UpdateLoginPolicyResponse r;
        o.status = stub_->UpdateLoginPolicy(ctx.get(), req, &r);
        o.what = "UpdateLoginPolicy";
        if (o.status.ok() && r.changed()) o.event_id = r.event_id();
      }
    }
    out.push_back(std::move(o));
  }
  CheckInvariant(*conn_, sink_, audit::v1::OWNER_AUTH, out, seed);
}

class AppHostileTest : public testing::OwnerServiceTest<app::AppServiceImpl, app::v1::AppService> {
 protected:
  void SetUp() override {
    StartOwner(app::Migrations(), "ulticode.app.v1.AppService", "hostileapp", app::AccessRules());
    if (HasFatalFailure() || IsSkipped()) return;
    ULTI_REQUIRE_PG(pg);
    sink_.Start(pg);
  }
  AdminSink sink_;
};

TEST_F(AppHostileTest, EveryAcceptedRequestLandsInAuditLogsAndNoStringIsBent) {
  const uint64_t seed = Seed();
  std::printf("[hostile] app seed=%llu\n", static_cast<unsigned long long>(seed));
  Generator g(seed);
  std::vector<std::string> problems, contests;
  const std::vector<std::string> paths = {"title", "statement", "time_limit", "memory_limit_mb",
                                          "difficulty"};
  std::vector<Outcome> out;
  const int64_t now_s = absl::ToUnixSeconds(absl::Now());
  for (int i = 0; i < RequestsPerService(); ++i) {
    Outcome o;
    auto ctx = Ctx("fuzzer");
    switch (g.Int(0, 5)) {
      case 0: {
        app::v1::CreateProblemRequest req;
        req.set_slug(g.Name(absl::StrCat("p-", i)));
        req.set_title(g.Name(absl::StrCat("Problem ", i)));
        req.set_statement(g.Text());
        *req.mutable_time_limit() =
            TimeUtil::MillisecondsToDuration(g.Chance(80) ? 1000 : g.Int(0, 70000));
        req.set_memory_limit_mb(g.Chance(80) ? 256 : g.Int(0, 5000));
        req.set_difficulty(g.Int(0, 11));
        req.set_request_id(g.RequestId());
        app::v1::ProblemResponse r;
        o.status = stub_->CreateProblem(ctx.get(), req, &r);
        if (o.status.ok() && r.changed()) {
          problems.push_back(r.problem().problem_id());
          EXPECT_EQ(r.problem().statement(), req.statement());
          EXPECT_EQ(r.problem().title(), req.title());
          o.event_id = r.event_id();
        }
        o.what = "CreateProblem";
        break;
      }
      case 1: {
        app::v1::UpdateProblemRequest req;
        app::v1::Problem* p = req.mutable_problem();
        p->set_problem_id(g.Id(problems));
        for (int k = g.Int(0, 3); k > 0; --k) {
          req.mutable_update_mask()->add_paths(g.Name(g.Pick(paths)));
        }
        p->set_title(g.Text());
        p->set_statement(g.Text());
        *p->mutable_time_limit() = TimeUtil::MillisecondsToDuration(g.Int(50, 70000));
        p->set_memory_limit_mb(g.Int(8, 5000));
        p->set_difficulty(g.Int(0, 11));
        req.set_request_id(g.RequestId());
        app::v1::ProblemResponse r;
        o.status = stub_->UpdateProblem(ctx.get(), req, &r);
        if (o.status.ok() && r.changed()) o.event_id = r.event_id();
        o.what = "UpdateProblem";
        break;
      }
      case 2: {
        app::v1::CreateContestRequest req;
        req.set_slug(g.Name(absl::StrCat("c-", i)));
        req.set_title(g.Name(absl::StrCat("Contest ", i)));
        req.mutable_starts_at()->set_seconds(now_s + g.Int(-100, 100000));
        req.mutable_ends_at()->set_seconds(now_s + g.Int(-100, 200000));
        req.set_request_id(g.RequestId());
        app::v1::ContestResponse r;
        o.status = stub_->CreateContest(ctx.get(), req, &r);
        if (o.status.ok() && r.changed()) {
          contests.push_back(r.contest().contest_id());
          o.event_id = r.event_id();
        }
        o.what = "CreateContest";
        break;
      }
      case 3: {
        app::v1::AddProblemToContestRequest req;
        req.set_contest_id(g.Id(contests));
        req.set_problem_id(g.Id(problems));
        req.set_label(g.Name(std::string(1, static_cast<char>('A' + g.Int(0, 25)))));
        req.set_request_id(g.RequestId());
        app::v1::ContestResponse r;
        o.status = stub_->AddProblemToContest(ctx.get(), req, &r);
        if (o.status.ok() && r.changed()) o.event_id = r.event_id();
        o.what = "AddProblemToContest";
        break;
      }
      case 4: {
        app::v1::RemoveProblemFromContestRequest req;
        req.set_contest_id(g.Id(contests));
        req.set_problem_id(g.Id(problems));
        req.set_request_id(g.RequestId());
        app::v1::ContestResponse r;
        o.status = stub_->RemoveProblemFromContest(ctx.get(), req, &r);
        if (o.status.ok() && r.changed()) o.event_id = r.event_id();
        o.what = "RemoveProblemFromContest";
        break;
      }
      default: {
        app::v1::PublishContestRequest req;
        req.set_contest_id(g.Id(contests));
        req.set_request_id(g.RequestId());
        app::v1::ContestResponse r;
        o.status = stub_->PublishContest(ctx.get(), req, &r);
        if (o.status.ok() && r.changed()) o.event_id = r.event_id();
        o.what = "PublishContest";
      }
    }
    out.push_back(std::move(o));
  }
  CheckInvariant(*conn_, sink_, audit::v1::OWNER_APP, out, seed);
}

// The request from the field report: a NUL hidden in a reason.
TEST_F(AuthHostileTest, NulInAReasonIsInvalidArgumentAndWritesNothing) {
  auth::v1::CreateUserRequest create;
  create.set_username("victim");
  create.set_email("victim@example.com");
  auth::v1::CreateUserResponse created;
  ASSERT_TRUE(stub_->CreateUser(Ctx().get(), create, &created).ok());
  const int64_t rows = OutboxRows();
  auth::v1::DisableUserRequest req;
  req.set_user_id(created.user().user_id());
  req.set_reason(std::string("\0hidden", 7));
  auth::v1::DisableUserResponse r;
  grpc::Status s = stub_->DisableUser(Ctx().get(), req, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "reason: control character U+0000 at character 1 is not allowed");
  EXPECT_EQ(OutboxRows(), rows);
  EXPECT_EQ(testing::QueryText(*conn_, "SELECT status FROM users WHERE user_id = '" +
                                           created.user().user_id() + "'"),
            "ACTIVE");
}

TEST_F(AuthHostileTest, RepeatedIdentityOrTraceHeadersAreRefused) {
  for (const char* header : {"authorization", "traceparent"}) {
    auth::v1::CreateUserRequest req;
    req.set_username("twice");
    req.set_email("twice@example.com");
    auto ctx = Ctx("alice");  // one authorization header already
    const std::string value = std::string(header) == "traceparent"
                                  ? "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                                  : testing::SharedTestTokens().Bearer("mallory");
    ctx->AddMetadata(header, value);
    if (std::string(header) == "traceparent") ctx->AddMetadata(header, value);
    auth::v1::CreateUserResponse r;
    grpc::Status s = stub_->CreateUser(ctx.get(), req, &r);
    EXPECT_NE(s.error_code(), grpc::StatusCode::OK) << header;
    EXPECT_NE(s.error_message().find(std::string("\"") + header + "\" was sent 2 times"),
              std::string::npos)
        << s.error_message();
    EXPECT_EQ(OutboxRows(), 0);
  }
}

TEST_F(AuthHostileTest, OversizedMessagesAreRefusedBeforeAnyWork) {
  auth::v1::CreateUserRequest req;
  req.set_username("big");
  req.set_email("big@example.com");
  req.set_display_name(std::string(server::kOwnerMaxReceiveBytes, 'x'));
  auth::v1::CreateUserResponse r;
  grpc::Status s = stub_->CreateUser(Ctx().get(), req, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_EQ(OutboxRows(), 0);
  EXPECT_EQ(Scalar("SELECT count(*) FROM users"), 0);
}

}  // namespace
}  // namespace ulticode

namespace ulticode {
namespace {

// Idempotency keys keep the SHA-256 of the canonical request: a repeat that
// only adds unknown fields is the same request, and no request bytes are
// stored.
TEST_F(AuthHostileTest, IdempotencyKeysStoreTheHashOfTheCanonicalRequest) {
  auth::v1::CreateUserRequest req;
  req.set_username("hashme");
  req.set_email("hashme@example.com");
  req.set_request_id(::ulticode::testing::RequestIdFor("r-hash-1"));
  auth::v1::CreateUserResponse first, second;
  ASSERT_TRUE(stub_->CreateUser(Ctx().get(), req, &first).ok());
  auth::v1::CreateUserRequest with_unknown = req;
  with_unknown.GetReflection()->MutableUnknownFields(&with_unknown)->AddVarint(999, 7);
  grpc::Status s = stub_->CreateUser(Ctx().get(), with_unknown, &second);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(second.event_id(), first.event_id()) << "the first response, replayed";
  EXPECT_EQ(OutboxRows(), 1);
  EXPECT_EQ(Scalar("SELECT length(request_sha256) FROM idempotency_keys"), 32);
  EXPECT_EQ(Scalar("SELECT count(*) FROM information_schema.columns WHERE "
                   "table_name = 'idempotency_keys' AND column_name = 'request'"),
            0);
  // A different request under the same id is still refused.
  req.set_email("other@example.com");
  EXPECT_EQ(stub_->CreateUser(Ctx().get(), req, &second).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace ulticode
