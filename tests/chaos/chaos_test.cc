// The chaos test: the whole pipeline's promise under faults.
//
// Starts a private PostgreSQL and Redis (it restarts and wipes them, so it
// never shares them with other tests) and TWO replicas of Auth, App and Admin
// (real binaries, real ports). Concurrent clients send mutating RPCs for a
// bounded time, retrying with their idempotency keys on UNAVAILABLE /
// DEADLINE_EXCEEDED and friends, and record every call that returned OK.
// Meanwhile a seeded, printed fault schedule kills service processes with
// SIGKILL (restarting them after a pause), restarts Redis WITHOUT persistence
// (streams, groups and receipts vanish; once at least while Admin is down,
// so a backlog of published events vanishes), freezes Redis with SIGSTOP,
// crashes PostgreSQL and terminates its backends.
//
// Then, with the faults over, it waits for quiescence and checks the three
// databases directly: every committed change has exactly one audit row with
// the right content, no audit row without its outbox row, no duplicates, no
// DEAD inbox rows and no unconfirmed outbox rows, every OK call reflected.
// One summary line; any loss, duplicate or orphan fails the test.
//
// Environment: ULTICODE_CHAOS_SEED (default: random, printed),
// ULTICODE_CHAOS_SECONDS (load duration, default 40; e.g. 600 for a soak),
// ULTICODE_CHAOS_CLIENTS (default 4).
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/audit/event.h"
#include "common/pg/connection.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/support/mesh.h"
#include "tests/support/pg_query.h"
#include "tests/support/pg_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/tokens.h"
#include "ulticode/app/v1/app.grpc.pb.h"
#include "ulticode/auth/v1/auth.grpc.pb.h"

namespace ulticode {
namespace {

using ::ulticode::testing::Mesh;
using ::ulticode::testing::QueryInt;
using ::ulticode::testing::Service;
using ::ulticode::testing::WaitFor;
namespace authv1 = ::ulticode::auth::v1;
namespace appv1 = ::ulticode::app::v1;

constexpr int kReplicas = 2;

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  int64_t out;
  return v != nullptr && absl::SimpleAtoi(v, &out) ? out : fallback;
}

// ----------------------------------------------------------------- faults

enum class Fault {
  kKillService,
  kRedisWipe,           // Redis restarted without persistence
  kRedisWipeAdminDown,  // the same while Admin is down: a backlog of published events vanishes
  kRedisFreeze,
  kPgCrash,
  kPgTerminate
};

const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kKillService:
      return "kill-9";
    case Fault::kRedisWipe:
      return "redis-wipe";
    case Fault::kRedisWipeAdminDown:
      return "redis-wipe-admin-down";
    case Fault::kRedisFreeze:
      return "redis-freeze";
    case Fault::kPgCrash:
      return "pg-crash";
    case Fault::kPgTerminate:
      return "pg-terminate-backends";
  }
  return "?";
}

struct ScheduledFault {
  absl::Duration at;  // since the load started
  Fault fault;
  Service service = Service::kAuth;  // kKillService
  int replica = 0;
  absl::Duration pause;  // how long the victim stays down / frozen
};

std::vector<ScheduledFault> MakeSchedule(uint64_t seed, absl::Duration load) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  // Kinds come from shuffled bags, so every kind occurs; a Redis wipe is
  // always among the first faults.
  std::vector<Fault> bag;
  std::vector<ScheduledFault> out;
  absl::Duration at = absl::Seconds(3);
  while (at < load - absl::Seconds(3)) {
    if (bag.empty()) {
      bag = {Fault::kKillService, Fault::kKillService,       Fault::kRedisWipe,
             Fault::kRedisFreeze, Fault::kPgCrash,           Fault::kPgTerminate,
             Fault::kKillService, Fault::kRedisWipeAdminDown};
      std::shuffle(bag.begin(), bag.end(), rng);
      if (out.empty()) {
        std::swap(*std::find(bag.begin(), bag.end(), Fault::kRedisWipeAdminDown), bag.back());
      }
    }
    ScheduledFault f;
    f.at = at;
    f.fault = bag.back();
    bag.pop_back();
    f.service = static_cast<Service>(uniform(0, 2));
    f.replica = uniform(0, kReplicas - 1);
    f.pause = absl::Milliseconds(uniform(500, 2500));
    out.push_back(f);
    at += absl::Milliseconds(uniform(1500, 4000));
  }
  return out;
}

const char* ServiceName(Service s) {
  switch (s) {
    case Service::kAuth:
      return "auth";
    case Service::kApp:
      return "app";
    case Service::kAdmin:
      return "admin";
  }
  return "?";
}

// ----------------------------------------------------------------- load

struct OkCall {
  audit::Owner owner;
  std::string event_id;  // empty when the call changed nothing
  std::string method;
  std::string principal;
  std::string request_id;
  std::string entity_id;
  // A new_value field the audit row must carry, and its value.
  std::string value_key, value;
};

bool Retryable(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::CANCELLED:
      return true;
    default:
      return false;
  }
}

class LoadDriver {
 public:
  LoadDriver(Mesh& mesh, uint64_t seed, int clients) : seed_(seed), clients_(clients) {
    for (int r = 0; r < kReplicas; ++r) {
      auth_.push_back(authv1::AuthService::NewStub(mesh.Channel(Service::kAuth, r)));
      app_.push_back(appv1::AppService::NewStub(mesh.Channel(Service::kApp, r)));
    }
  }

  // Runs the clients until `stop`, then lets in-flight calls finish their
  // retries (bounded).
  void Run(std::atomic<bool>& stop) {
    std::vector<std::thread> threads;
    for (int c = 0; c < clients_; ++c) threads.emplace_back([this, c, &stop] { Client(c, stop); });
    for (auto& t : threads) t.join();
  }

  std::vector<OkCall> ok_calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return ok_;
  }
  int64_t attempts() const { return attempts_.load(); }
  int64_t operations() const { return operations_.load(); }
  int64_t gave_up() const { return gave_up_.load(); }
  int64_t rejected() const { return rejected_.load(); }

 private:
  // Calls `rpc` until OK, a non-retryable status, or the retry budget ends;
  // every attempt goes to a random replica with the same request id.
  template <typename Call>
  grpc::Status WithRetries(std::mt19937_64& rng, Call&& rpc) {
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    grpc::Status status;
    for (int attempt = 0;; ++attempt) {
      ++attempts_;
      status = rpc(static_cast<int>(rng() % kReplicas));
      if (status.ok() || !Retryable(status.error_code())) return status;
      if (absl::Now() > give_up) return status;
      absl::SleepFor(absl::Milliseconds(std::min(50 * (attempt + 1), 500)));
    }
  }

  static void Prepare(grpc::ClientContext* ctx, const std::string& principal) {
    ctx->AddMetadata("authorization", testing::SharedTestTokens().Bearer(principal));
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  void Record(OkCall call) {
    std::lock_guard<std::mutex> lock(mu_);
    ok_.push_back(std::move(call));
  }

  void Client(int c, std::atomic<bool>& stop) {
    std::mt19937_64 rng(seed_ * 1000 + c);
    const std::string principal = absl::StrCat("chaos-client-", c);
    std::vector<std::string> users, problems;
    static const char* kRoles[] = {"judge", "problem_setter", "admin"};
    for (int n = 0; !stop.load(); ++n) {
      ++operations_;
      const std::string request_id = absl::StrCat("chaos-", seed_, "-", c, "-", n);
      const int kind = users.empty() || problems.empty() ? n % 2 : static_cast<int>(rng() % 5);
      grpc::Status s;
      if (kind == 0) {
        authv1::CreateUserRequest req;
        req.set_username(absl::StrCat("u", c, "x", n, "s", seed_ % 100000));
        req.set_email(absl::StrCat(req.username(), "@example.com"));
        req.set_request_id(request_id);
        authv1::CreateUserResponse resp;
        s = WithRetries(rng, [&](int r) {
          grpc::ClientContext ctx;
          Prepare(&ctx, principal);
          return auth_[r]->CreateUser(&ctx, req, &resp);
        });
        if (s.ok()) {
          users.push_back(resp.user().user_id());
          Record({audit::v1::OWNER_AUTH, resp.event_id(), "CreateUser", principal, request_id,
                  resp.user().user_id(), "username", req.username()});
        }
      } else if (kind == 1) {
        appv1::CreateProblemRequest req;
        req.set_slug(absl::StrCat("p", c, "x", n, "s", seed_ % 100000));
        req.set_title(absl::StrCat("Problem ", n));
        req.set_statement("Compute.");
        req.set_time_limit_ms(1000);
        req.set_memory_limit_mb(256);
        req.set_difficulty(1 + n % 5);
        req.set_request_id(request_id);
        appv1::ProblemResponse resp;
        s = WithRetries(rng, [&](int r) {
          grpc::ClientContext ctx;
          Prepare(&ctx, principal);
          return app_[r]->CreateProblem(&ctx, req, &resp);
        });
        if (s.ok()) {
          problems.push_back(resp.problem().problem_id());
          Record({audit::v1::OWNER_APP, resp.event_id(), "CreateProblem", principal, request_id,
                  resp.problem().problem_id(), "slug", req.slug()});
        }
      } else if (kind == 2 || kind == 3) {
        const bool assign = kind == 2;
        const std::string& user = users[rng() % users.size()];
        const std::string role = kRoles[rng() % 3];
        std::string event_id;
        bool changed = false;
        s = WithRetries(rng, [&](int r) {
          grpc::ClientContext ctx;
          Prepare(&ctx, principal);
          if (assign) {
            authv1::AssignRoleRequest req;
            req.set_user_id(user);
            req.set_role(role);
            req.set_request_id(request_id);
            authv1::AssignRoleResponse resp;
            auto st = auth_[r]->AssignRole(&ctx, req, &resp);
            event_id = resp.event_id();
            changed = resp.changed();
            return st;
          }
          authv1::RevokeRoleRequest req;
          req.set_user_id(user);
          req.set_role(role);
          req.set_request_id(request_id);
          authv1::RevokeRoleResponse resp;
          auto st = auth_[r]->RevokeRole(&ctx, req, &resp);
          event_id = resp.event_id();
          changed = resp.changed();
          return st;
        });
        if (s.ok()) {
          Record({audit::v1::OWNER_AUTH, changed ? event_id : "",
                  assign ? "AssignRole" : "RevokeRole", principal, request_id,
                  absl::StrCat(user, "/", role), "", ""});
        }
      } else {
        appv1::UpdateProblemRequest req;
        req.set_problem_id(problems[rng() % problems.size()]);
        req.add_update_mask("title");
        req.set_title(absl::StrCat("Title ", request_id));
        req.set_request_id(request_id);
        appv1::ProblemResponse resp;
        s = WithRetries(rng, [&](int r) {
          grpc::ClientContext ctx;
          Prepare(&ctx, principal);
          return app_[r]->UpdateProblem(&ctx, req, &resp);
        });
        if (s.ok()) {
          Record({audit::v1::OWNER_APP, resp.changed() ? resp.event_id() : "", "UpdateProblem",
                  principal, request_id, req.problem_id(), "title", req.title()});
        }
      }
      if (!s.ok()) {
        if (Retryable(s.error_code())) {
          ++gave_up_;
        } else {
          ++rejected_;
          std::lock_guard<std::mutex> lock(mu_);
          if (first_rejection_.empty()) first_rejection_ = s.error_message();
        }
      }
    }
  }

 public:
  std::string first_rejection() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_rejection_;
  }

 private:
  const uint64_t seed_;
  const int clients_;
  std::vector<std::unique_ptr<authv1::AuthService::Stub>> auth_;
  std::vector<std::unique_ptr<appv1::AppService::Stub>> app_;
  std::mutex mu_;
  std::vector<OkCall> ok_;
  std::string first_rejection_;
  std::atomic<int64_t> attempts_{0}, operations_{0}, gave_up_{0}, rejected_{0};
};

// ----------------------------------------------------------------- checks

std::unique_ptr<pg::Connection> Connect(const std::string& dsn) {
  pg::ConnectOptions o;
  o.conninfo = dsn;
  auto c = pg::Connection::Connect(o);
  return c.ok() ? std::move(c).value() : nullptr;
}

struct OutboxRow {
  audit::Owner owner;
  std::string state;
  std::string payload;
};

TEST(ChaosTest, NoLossNoDuplicatesNoOrphansUnderKillsRedisWipesAndDatabaseCrashes) {
  const uint64_t seed =
      static_cast<uint64_t>(EnvInt("ULTICODE_CHAOS_SEED", std::random_device{}() % 1000000));
  const absl::Duration load = absl::Seconds(EnvInt("ULTICODE_CHAOS_SECONDS", 40));
  const int clients = static_cast<int>(EnvInt("ULTICODE_CHAOS_CLIENTS", 4));
  std::printf("[chaos] seed=%llu load=%s clients=%d (reproduce: ULTICODE_CHAOS_SEED=%llu)\n",
              static_cast<unsigned long long>(seed), absl::FormatDuration(load).c_str(), clients,
              static_cast<unsigned long long>(seed));

  // Private servers: this test crashes and wipes them.
  testing::PgServer pg;
  std::string error;
  ASSERT_TRUE(pg.Start(&error)) << error;
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start());

  testing::MeshOptions options;
  options.prefix = "chaos";
  options.redis_addr = absl::StrCat("127.0.0.1:", redis.port());
  const std::vector<std::string> owner_args = {
      "--pg-pool-size=4",          "--dispatch-resend-timeout=3s",   "--dispatch-claim-lease=5s",
      "--dispatch-backoff-max=1s", "--dispatch-poll-interval=500ms", "--startup-timeout=120s",
      "--shutdown-timeout=2s"};
  options.auth_args = owner_args;
  options.app_args = owner_args;
  options.admin_args = {"--pg-pool-size=4",
                        "--inbox-claim-idle=2s",
                        "--inbox-claim-interval=1s",
                        "--consumer-lease=5s",
                        "--consumer-heartbeat=1s",
                        "--consumer-retry-max=1s",
                        "--consumer-poll-interval=500ms",
                        "--startup-timeout=120s",
                        "--shutdown-timeout=2s"};
  // The harness's Redis user (the default user is off under scripts/test.sh).
  testing::RedisEndpoint redis_endpoint;
  redis_endpoint.host = "127.0.0.1";
  redis_endpoint.port = redis.port();
  if (auto shared = testing::RedisFromEnv()) {
    redis_endpoint.user = shared->user;
    redis_endpoint.password = shared->password;
    redis_endpoint.password_file = shared->password_file;
  }
  Mesh mesh(pg.endpoint(), redis_endpoint, options);
  for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
    for (int r = 0; r < kReplicas; ++r) ASSERT_TRUE(mesh.Start(s, r, &error)) << error;
  }

  const auto schedule = MakeSchedule(seed, load);
  for (const auto& f : schedule) {
    const std::string victim =
        f.fault == Fault::kKillService ? absl::StrCat(ServiceName(f.service), "-", f.replica) : "-";
    std::printf("[chaos] schedule t=%-8s %-22s %-8s pause=%s\n", absl::FormatDuration(f.at).c_str(),
                FaultName(f.fault), victim.c_str(), absl::FormatDuration(f.pause).c_str());
  }

  // --- load and faults ---
  LoadDriver driver(mesh, seed, clients);
  std::atomic<bool> stop{false};
  const absl::Time start = absl::Now();
  std::thread load_thread([&] { driver.Run(stop); });
  std::map<Fault, int> counts;
  std::vector<std::string> wiped_backlog;  // PUBLISHED event ids lost with Redis
  for (const auto& f : schedule) {
    absl::SleepFor(start + f.at - absl::Now());
    ++counts[f.fault];
    switch (f.fault) {
      case Fault::kKillService:
        mesh.Kill(f.service, f.replica);
        absl::SleepFor(f.pause);
        EXPECT_TRUE(mesh.Start(f.service, f.replica, &error)) << error;
        break;
      case Fault::kRedisWipe:
        redis.Kill();
        absl::SleepFor(f.pause);
        EXPECT_TRUE(redis.Start()) << "redis restart";
        break;
      case Fault::kRedisWipeAdminDown: {
        for (int r = 0; r < kReplicas; ++r) mesh.Kill(Service::kAdmin, r);
        absl::SleepFor(f.pause);  // owners keep publishing; nobody reads
        // What is about to vanish: events published and not yet confirmed.
        for (Service owner : {Service::kAuth, Service::kApp}) {
          if (auto db = Connect(mesh.Dsn(owner))) {
            pg::Statement st{"chaos.backlog",
                             "SELECT event_id::text FROM audit_outbox WHERE state = 'PUBLISHED'"};
            if (auto r = db->Execute(st); r.ok()) {
              for (int i = 0; i < r->rows(); ++i) wiped_backlog.push_back(r->GetString(i, 0));
            }
          }
        }
        redis.Kill();
        EXPECT_TRUE(redis.Start()) << "redis restart";
        for (int r = 0; r < kReplicas; ++r) {
          EXPECT_TRUE(mesh.Start(Service::kAdmin, r, &error)) << error;
        }
        break;
      }
      case Fault::kRedisFreeze:
        redis.Freeze();
        absl::SleepFor(f.pause + absl::Milliseconds(2500));  // beyond the 2 s command timeouts
        redis.Thaw();
        break;
      case Fault::kPgCrash:
        EXPECT_TRUE(pg.Crash(&error)) << error;
        break;
      case Fault::kPgTerminate:
        pg.TerminateBackends();
        break;
    }
  }
  absl::SleepFor(start + load - absl::Now());
  stop = true;
  load_thread.join();
  const absl::Time load_end = absl::Now();
  for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
    for (int r = 0; r < kReplicas; ++r) {
      EXPECT_TRUE(mesh.Running(s, r)) << ServiceName(s) << "-" << r << " died by itself:\n"
                                      << mesh.Output(s, r);
    }
  }

  // --- quiescence: every outbox row confirmed, the inbox drained ---
  auto auth_db = Connect(mesh.Dsn(Service::kAuth));
  auto app_db = Connect(mesh.Dsn(Service::kApp));
  auto admin_db = Connect(mesh.Dsn(Service::kAdmin));
  ASSERT_TRUE(auth_db && app_db && admin_db);
  const char* kNotConfirmed = "SELECT count(*) FROM audit_outbox WHERE state <> 'CONFIRMED'";
  const bool quiet = WaitFor(
      [&] {
        return QueryInt(*auth_db, kNotConfirmed) == 0 && QueryInt(*app_db, kNotConfirmed) == 0 &&
               QueryInt(*admin_db,
                        "SELECT count(*) FROM consumer_inbox WHERE status IN ('PENDING', "
                        "'PROCESSING')") == 0;
      },
      std::chrono::seconds(180));
  const double converge_s = absl::ToDoubleSeconds(absl::Now() - load_end);

  // --- checks, directly in the three databases ---
  std::map<std::string, OutboxRow> outbox;  // event id -> row
  int64_t outbox_duplicates = 0;
  for (auto [conn, owner] : {std::pair{auth_db.get(), audit::v1::OWNER_AUTH},
                             std::pair{app_db.get(), audit::v1::OWNER_APP}}) {
    pg::Statement st{"chaos.outbox", "SELECT event_id::text, state, payload FROM audit_outbox",
                     absl::Seconds(30)};
    auto r = conn->Execute(st);
    ASSERT_TRUE(r.ok()) << r.status();
    for (int i = 0; i < r->rows(); ++i) {
      if (!outbox
               .emplace(r->GetString(i, 0), OutboxRow{owner, r->GetString(i, 1), r->GetBytes(i, 2)})
               .second) {
        ++outbox_duplicates;
      }
    }
  }
  // Every business change has its outbox row (same transaction).
  EXPECT_EQ(QueryInt(*auth_db, "SELECT count(*) FROM users"),
            QueryInt(*auth_db,
                     "SELECT count(*) FROM audit_outbox WHERE event_type = 'auth.user.created'"));
  EXPECT_EQ(QueryInt(*app_db, "SELECT count(*) FROM problems"),
            QueryInt(*app_db,
                     "SELECT count(*) FROM audit_outbox WHERE event_type = 'app.problem.created'"));

  pg::Statement logs_st{"chaos.logs",
                        "SELECT event_id::text, owner, actor, action, entity_type, entity_id,"
                        " coalesce(new_value::text, ''), envelope, request_id FROM audit_logs",
                        absl::Seconds(30)};
  auto logs = admin_db->Execute(logs_st);
  ASSERT_TRUE(logs.ok()) << logs.status();
  std::set<std::string> logged;
  // What Admin shows for each event: actor, entity id, request id, new_value.
  struct Shown {
    std::string actor, entity_id, request_id;
    google::protobuf::Struct new_value;
  };
  std::map<std::string, Shown> shown;
  int64_t orphaned = 0, wrong = 0, duplicated = outbox_duplicates;
  for (int i = 0; i < logs->rows(); ++i) {
    const std::string id = logs->GetString(i, 0);
    if (!logged.insert(id).second) ++duplicated;
    auto it = outbox.find(id);
    if (it == outbox.end() || audit::OwnerName(it->second.owner) != logs->GetString(i, 1)) {
      ++orphaned;
      continue;
    }
    audit::AuditEvent event;
    ASSERT_TRUE(event.ParseFromString(it->second.payload));
    const auto& rec = event.record();
    google::protobuf::Struct new_value;
    const std::string json = logs->GetString(i, 6);
    bool values_match =
        json.empty()
            ? !rec.has_new_value()
            : google::protobuf::util::JsonStringToMessage(json, &new_value).ok() &&
                  google::protobuf::util::MessageDifferencer::Equals(new_value, rec.new_value());
    shown[id] =
        Shown{logs->GetString(i, 2), logs->GetString(i, 5), logs->GetString(i, 8), new_value};
    if (logs->GetString(i, 2) != rec.actor() || logs->GetString(i, 3) != rec.action() ||
        logs->GetString(i, 4) != rec.entity_type() || logs->GetString(i, 5) != rec.entity_id() ||
        !values_match || logs->GetBytes(i, 7) != it->second.payload) {
      if (wrong++ == 0) ADD_FAILURE() << "audit row differs from its outbox event " << id;
    }
  }
  // One request executed twice would leave two events (with different ids)
  // carrying the same request id.
  std::map<std::string, std::string> event_of_request;
  for (const auto& [id, row] : outbox) {
    audit::AuditEvent event;
    if (!event.ParseFromString(row.payload) || event.record().request_id().empty()) continue;
    auto [it, fresh] = event_of_request.emplace(event.record().request_id(), id);
    if (!fresh) {
      ++duplicated;
      ADD_FAILURE() << "request " << it->first << " produced two events: " << it->second << " and "
                    << id;
    }
  }
  int64_t lost = 0, unconfirmed = 0;
  for (const auto& [id, row] : outbox) {
    if (!logged.contains(id)) {
      if (lost++ < 5) {
        pg::Statement inbox_st{"chaos.inbox_row",
                               "SELECT status || ' attempts=' || attempts || ' error=' ||"
                               " coalesce(last_error, '-') || ' received=' || received_at"
                               " FROM consumer_inbox WHERE event_id = $1::uuid"};
        auto in = admin_db->Execute(inbox_st, {pg::Text(id)});
        pg::Statement out_st{"chaos.outbox_row",
                             "SELECT 'attempts=' || attempts || ' resends=' || resends ||"
                             " ' entry=' || coalesce(stream_entry_id, '-') || ' created=' ||"
                             " created_at || ' published=' || coalesce(published_at::text, '-') ||"
                             " ' confirmed=' || coalesce(confirmed_at::text, '-')"
                             " FROM audit_outbox WHERE event_id = $1::uuid"};
        auto out = (row.owner == audit::v1::OWNER_AUTH ? auth_db : app_db)
                       ->Execute(out_st, {pg::Text(id)});
        ADD_FAILURE() << "lost: event " << id << " owner " << audit::OwnerName(row.owner)
                      << " outbox state " << row.state << " "
                      << (out.ok() && out->rows() == 1 ? out->GetString(0, 0) : "?") << "; inbox: "
                      << (in.ok() && in->rows() == 1 ? in->GetString(0, 0) : "absent");
      }
    }
    if (row.state != "CONFIRMED") ++unconfirmed;
  }
  duplicated +=
      QueryInt(*admin_db, "SELECT count(*) - count(DISTINCT event_id) FROM consumer_inbox");
  const int64_t dead =
      QueryInt(*admin_db, "SELECT count(*) FROM consumer_inbox WHERE status = 'DEAD'");
  const int64_t poison = QueryInt(*admin_db, "SELECT count(*) FROM poison_events");
  int64_t ok_missing = 0, ok_with_event = 0;
  for (const OkCall& call : driver.ok_calls()) {
    if (call.event_id.empty()) continue;
    ++ok_with_event;
    if (!logged.contains(call.event_id)) {
      if (ok_missing++ < 5) {
        ADD_FAILURE() << "OK call " << call.method << " returned event " << call.event_id
                      << " which has no audit row; in its owner's outbox: "
                      << (outbox.contains(call.event_id) ? "yes" : "NO");
      }
      continue;
    }
    // The audit row says what the client did: who, to what, with which value.
    const Shown& s = shown[call.event_id];
    const auto& fields = s.new_value.fields();
    const bool value_ok =
        call.value_key.empty() ||
        (fields.contains(call.value_key) && fields.at(call.value_key).string_value() == call.value);
    if (s.actor != call.principal || s.entity_id != call.entity_id ||
        s.request_id != call.request_id || !value_ok) {
      if (wrong++ < 5) {
        ADD_FAILURE() << call.method << " " << call.request_id << ": audit row shows actor "
                      << s.actor << ", entity " << s.entity_id << ", request " << s.request_id;
      }
    }
  }
  int64_t backlog_recovered = 0;
  for (const std::string& id : wiped_backlog) {
    auto it = outbox.find(id);
    if (it != outbox.end() && it->second.state == "CONFIRMED" && logged.contains(id))
      ++backlog_recovered;
  }
  const int64_t resends = QueryInt(*auth_db, "SELECT coalesce(sum(resends), 0) FROM audit_outbox") +
                          QueryInt(*app_db, "SELECT coalesce(sum(resends), 0) FROM audit_outbox");

  std::printf(
      "[chaos] SUMMARY seed=%llu operations=%lld ok_events=%lld attempts=%lld gave_up=%lld "
      "kills=%d redis_wipes=%d redis_wipes_admin_down=%d redis_freezes=%d pg_crashes=%d "
      "pg_terminations=%d "
      "events=%zu audit_rows=%zu wiped_backlog=%zu recovered=%lld resends=%lld lost=%lld "
      "duplicated=%lld orphaned=%lld wrong=%lld "
      "unconfirmed=%lld dead=%lld poison=%lld ok_missing=%lld converge_s=%.1f\n",
      static_cast<unsigned long long>(seed), static_cast<long long>(driver.operations()),
      static_cast<long long>(ok_with_event), static_cast<long long>(driver.attempts()),
      static_cast<long long>(driver.gave_up()), counts[Fault::kKillService],
      counts[Fault::kRedisWipe], counts[Fault::kRedisWipeAdminDown], counts[Fault::kRedisFreeze],
      counts[Fault::kPgCrash], counts[Fault::kPgTerminate], outbox.size(), logged.size(),
      wiped_backlog.size(), static_cast<long long>(backlog_recovered),
      static_cast<long long>(resends), static_cast<long long>(lost),
      static_cast<long long>(duplicated), static_cast<long long>(orphaned),
      static_cast<long long>(wrong), static_cast<long long>(unconfirmed),
      static_cast<long long>(dead), static_cast<long long>(poison),
      static_cast<long long>(ok_missing), converge_s);

  EXPECT_TRUE(quiet) << "no quiescence within 180 s after the faults stopped";
  EXPECT_GT(ok_with_event, 100) << "the load did not get through";
  EXPECT_GT(wiped_backlog.size(), 0u) << "the Redis wipe with Admin down destroyed nothing";
  EXPECT_EQ(backlog_recovered, static_cast<int64_t>(wiped_backlog.size()))
      << "events that vanished with Redis were not all re-sent and confirmed";
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(duplicated, 0);
  EXPECT_EQ(orphaned, 0);
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(unconfirmed, 0);
  EXPECT_EQ(dead, 0);
  EXPECT_EQ(poison, 0) << "owners only publish valid events";
  EXPECT_EQ(ok_missing, 0);
  EXPECT_EQ(driver.rejected(), 0) << "a retried call was refused: " << driver.first_rejection();
}

}  // namespace
}  // namespace ulticode
