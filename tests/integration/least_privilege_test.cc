// Least privilege, proven on the mesh as deployed: the three real binaries
// migrate as their migration roles and run as their runtime roles and Redis
// ACL users (tools/bootstrap, as scripts/run-local.sh sets them up). Then
// each role and user is tried against what it must not do.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"
#include "gtest/gtest.h"
#include "tests/support/mesh.h"
#include "tests/support/mesh_calls.h"
#include "tests/support/pg_query.h"
#include "tests/support/test_env.h"
#include "tools/bootstrap/bootstrap.h"

namespace ulticode {
namespace {

using testing::Mesh;
using testing::Service;

class LeastPrivilegeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    ULTI_REQUIRE_REDIS(redis);
    pg_ = pg;
    redis_ = redis;
    testing::MeshOptions options;
    options.prefix = "lp";
    mesh_ = std::make_unique<Mesh>(pg, redis, options);
    std::string error;
    for (Service s : {Service::kAuth, Service::kApp, Service::kAdmin}) {
      ASSERT_TRUE(mesh_->Start(s, 0, &error)) << error;
    }
  }
  void TearDown() override {
    if (!mesh_) return;
    for (Service s : {Service::kAuth, Service::kApp, Service::kAdmin}) mesh_->Terminate(s, 0);
  }

  // A connection as `service`'s runtime role to `database_of`'s database.
  absl::StatusOr<std::unique_ptr<pg::Connection>> AsRuntime(Service service, Service database_of,
                                                            std::string password = "") {
    pg::ConnectOptions o;
    const std::string dsn = mesh_->Dsn(database_of);
    o.conninfo = dsn.substr(0, dsn.find(" user=")) + dsn.substr(dsn.find(" dbname="));
    o.user = mesh_->RuntimeRole(service);
    o.password = password.empty() ? mesh_->RuntimePassword(service) : password;
    return pg::Connection::Connect(o);
  }

  static absl::Status Exec(pg::Connection& c, const std::string& sql) {
    return c.Execute(pg::Statement{"lp", sql.c_str()}).status();
  }

  testing::PgEndpoint pg_;
  testing::RedisEndpoint redis_;
  std::unique_ptr<Mesh> mesh_;
};

TEST_F(LeastPrivilegeTest, AdminsRuntimeRoleCanAppendAndReadTheAuditTrailButNeverRewriteIt) {
  auto admin = AsRuntime(Service::kAdmin, Service::kAdmin);
  ASSERT_TRUE(admin.ok()) << admin.status();
  const std::string insert =
      "INSERT INTO audit_logs (event_id, owner, event_type, actor, action, "
      "entity_type, entity_id, occurred_at, envelope, seal, key_id) VALUES "
      "('0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b', 'auth', 'auth.user.created', 'a', "
      "'create_user', 'user', 'u', now(), '\\x00', ";
  // A row no owner sealed cannot be written at all (23514 check_violation):
  // no seal, no key id, a bare 64-byte signature, a seal with a partial hash.
  for (const char* unsigned_row :
       {"NULL, NULL)", "'\\x00', 'k1')", "repeat('s', 64)::bytea, 'k1')",
        "decode('01' || '00000000' || '00000001' || repeat('73', 64), 'hex'), '')",
        "decode('01' || '00000000' || '00000002' || repeat('73', 80), 'hex'), 'k1')"}) {
    absl::Status s = Exec(**admin, insert + unsigned_row);
    EXPECT_NE(std::string(s.message()).find("23514"), std::string::npos)
        << unsigned_row << ": " << s;
  }
  ASSERT_TRUE(
      Exec(**admin, insert + "decode('01' || '00000000' || '00000001' || repeat('73', 64), 'hex'),"
                             " 'k1')")
          .ok());
  EXPECT_EQ(testing::QueryInt(**admin, "SELECT count(*) FROM audit_logs"), 1);
  // The row waits in the log's queue; the runtime role cannot take it off
  // before the sequencer made it a leaf.
  EXPECT_EQ(testing::QueryInt(**admin,
                              "SELECT count(*) FROM log_queue_done("
                              "ARRAY['0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b']::uuid[])"),
            0);
  EXPECT_EQ(testing::QueryInt(**admin, "SELECT count(*) FROM log_queue"), 1);
  for (const char* sql :
       {"UPDATE audit_logs SET actor = 'mallory'", "DELETE FROM audit_logs", "TRUNCATE audit_logs",
        "DROP TABLE audit_logs", "ALTER TABLE audit_logs DISABLE TRIGGER ALL",
        "CREATE TABLE shadow (x int)", "DELETE FROM poison_events",
        "UPDATE poison_events SET reason = 'x'", "DELETE FROM consumer_inbox",
        // The transparency log only grows.
        "UPDATE log_leaves SET log_index = log_index + 1", "DELETE FROM log_leaves",
        "UPDATE log_nodes SET hash = hash", "DELETE FROM log_nodes",
        "UPDATE log_checkpoints SET note = ''", "DELETE FROM log_checkpoints",
        "DELETE FROM log_cosignatures", "DELETE FROM log_queue", "TRUNCATE log_queue",
        "UPDATE log_queue SET event_id = gen_random_uuid()"}) {
    absl::Status s = Exec(**admin, sql);
    EXPECT_FALSE(s.ok()) << sql;
    // 42501 insufficient_privilege ("permission denied", "must be owner").
    EXPECT_NE(std::string(s.message()).find("42501"), std::string::npos) << sql << ": " << s;
  }
  // Retention is the only way rows go, and it cannot be bent: the function
  // keeps its floor (48 h for the inbox) whatever it is asked.
  ASSERT_TRUE(Exec(**admin,
                   "INSERT INTO consumer_inbox (consumer, event_id, owner, event_type, payload, "
                   "payload_sha256, stream, stream_entry_id, status, processed_at) VALUES "
                   "('audit_logs', '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c', 'auth', "
                   "'auth.user.created', '\\x00', '\\x00', 's', '1-1', 'PROCESSED', now())")
                  .ok());
  EXPECT_EQ(testing::QueryInt(**admin, "SELECT inbox_retention(0, 10000)"), 0);
  EXPECT_EQ(testing::QueryInt(**admin, "SELECT count(*) FROM consumer_inbox"), 1);
  EXPECT_EQ(testing::QueryInt(**admin, "SELECT count(*) FROM audit_logs"), 1);
}

// What each runtime role may do in its database, privilege by privilege
// ("table:PRIV", "table(column):PRIV", "function:definer"): the catalogue
// that EveryPrivilegeOfARuntimeRoleIsInTheCatalogue holds the database to
// and docs/security.md shows.
const std::pair<Service, const char*> kCatalogue[] = {
    {Service::kAdmin,
     "audit_logs:INSERT audit_logs:SELECT consumer_inbox:INSERT "
     "consumer_inbox:SELECT consumer_inbox:UPDATE "
     "erase_personal_data:definer idempotency_keys:INSERT "
     "idempotency_keys:SELECT idempotency_retention:definer "
     "inbox_retention:definer log_checkpoints:INSERT log_checkpoints:SELECT "
     "log_cosignatures:INSERT log_cosignatures:SELECT log_leaves:INSERT "
     "log_leaves:SELECT log_nodes:INSERT log_nodes:SELECT "
     "log_proof_requests:DELETE log_proof_requests:INSERT "
     "log_proof_requests:SELECT log_queue:INSERT log_queue:SELECT "
     "log_queue_done:definer log_witnesses:INSERT log_witnesses:SELECT "
     "log_witnesses:UPDATE owner_sequence_checked:INSERT "
     "owner_sequence_checked:SELECT owner_sequence_checked:UPDATE "
     "owner_sequence_gaps:INSERT owner_sequence_gaps:SELECT "
     "owner_sequence_gaps:UPDATE personal_erasures:SELECT "
     "personal_values:INSERT personal_values:SELECT "
     "poison_events(resolution):UPDATE poison_events(resolved_at):UPDATE "
     "poison_events:INSERT poison_events:SELECT poison_retention:definer "
     "schema_migrations:SELECT"},
    {Service::kAuth,
     "audit_outbox(attempts):UPDATE audit_outbox(confirmed_at):UPDATE "
     "audit_outbox(failures):UPDATE audit_outbox(last_error):UPDATE "
     "audit_outbox(next_attempt_at):UPDATE audit_outbox(publication):UPDATE "
     "audit_outbox(publication_floor):UPDATE "
     "audit_outbox(published_at):UPDATE audit_outbox(resends):UPDATE "
     "audit_outbox(seal):UPDATE audit_outbox(sealed_by):UPDATE "
     "audit_outbox(state):UPDATE audit_outbox(stream_entry_id):UPDATE "
     "audit_outbox:INSERT audit_outbox:SELECT audit_outbox_personal:INSERT "
     "audit_outbox_personal:SELECT erase_personal_data:definer "
     "idempotency_keys:INSERT idempotency_keys:SELECT "
     "idempotency_retention:definer log_witnessed:INSERT "
     "log_witnessed:SELECT log_witnessed:UPDATE login_policy:SELECT "
     "login_policy:UPDATE outbox_numbers_attested:INSERT "
     "outbox_numbers_attested:SELECT outbox_numbers_attested:UPDATE "
     "outbox_retention:definer personal_erasures:SELECT roles:SELECT "
     "schema_migrations:SELECT user_roles:DELETE user_roles:INSERT "
     "user_roles:SELECT users:INSERT users:SELECT users:UPDATE"},
    {Service::kApp,
     "audit_outbox(attempts):UPDATE audit_outbox(confirmed_at):UPDATE "
     "audit_outbox(failures):UPDATE audit_outbox(last_error):UPDATE "
     "audit_outbox(next_attempt_at):UPDATE audit_outbox(publication):UPDATE "
     "audit_outbox(publication_floor):UPDATE "
     "audit_outbox(published_at):UPDATE audit_outbox(resends):UPDATE "
     "audit_outbox(seal):UPDATE audit_outbox(sealed_by):UPDATE "
     "audit_outbox(state):UPDATE audit_outbox(stream_entry_id):UPDATE "
     "audit_outbox:INSERT audit_outbox:SELECT audit_outbox_personal:INSERT "
     "audit_outbox_personal:SELECT contest_problems:DELETE "
     "contest_problems:INSERT contest_problems:SELECT contests:INSERT "
     "contests:SELECT contests:UPDATE erase_personal_data:definer "
     "idempotency_keys:INSERT idempotency_keys:SELECT "
     "idempotency_retention:definer log_witnessed:INSERT "
     "log_witnessed:SELECT log_witnessed:UPDATE "
     "outbox_numbers_attested:INSERT outbox_numbers_attested:SELECT "
     "outbox_numbers_attested:UPDATE outbox_retention:definer "
     "personal_erasures:SELECT problems:INSERT problems:SELECT "
     "problems:UPDATE schema_migrations:SELECT"},
};

// Every privilege a runtime role holds, read from the catalog: each table
// privilege and each function it may execute (SECURITY DEFINER ones
// marked). The lists below are the catalogue of what each login can do
// (docs/security.md); a grant added without a line here fails the test.
std::string PrivilegesOf(pg::Connection& c, const std::string& role) {
  return testing::QueryText(
      c,
      absl::StrCat("SELECT coalesce(string_agg(p, ' ' ORDER BY p), '') FROM ("
                   "  SELECT t.table_name || ':' || t.privilege_type AS p"
                   "    FROM information_schema.role_table_grants t"
                   "    WHERE t.grantee = '",
                   role,
                   "'"
                   "  UNION ALL"
                   "  SELECT c.relname || '(' || a.attname || '):' || x.privilege_type"
                   "    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid,"
                   "         aclexplode(a.attacl) x"
                   "    WHERE c.relnamespace = 'public'::regnamespace AND x.grantee = '",
                   role,
                   "'::regrole"
                   "  UNION ALL"
                   "  SELECT f.proname || CASE WHEN f.prosecdef THEN ':definer' ELSE ':execute' END"
                   "    FROM pg_proc f JOIN pg_namespace n ON n.oid = f.pronamespace"
                   "    WHERE n.nspname = 'public'"
                   "      AND has_function_privilege('",
                   role,
                   "', f.oid, 'EXECUTE')"
                   "      AND EXISTS (SELECT 1 FROM aclexplode(f.proacl) a"
                   "                  WHERE a.grantee = '",
                   role, "'::regrole)) x"));
}

TEST_F(LeastPrivilegeTest, EveryPrivilegeOfARuntimeRoleIsInTheCatalogue) {
  for (const auto& [s, want] : kCatalogue) {
    auto conn = AsRuntime(s, s);
    ASSERT_TRUE(conn.ok()) << conn.status();
    EXPECT_EQ(PrivilegesOf(**conn, mesh_->RuntimeRole(s)), want)
        << mesh_->RuntimeRole(s) << ": a privilege not in the catalogue (or one gone from it)";
  }
}

// What each SECURITY DEFINER function a runtime role may execute must keep,
// whatever arguments that role passes: a count that must not drop, or an
// invariant query that must stay 0.
struct DefinerPlan {
  Service db;  // kAuth stands for both owners
  const char* function;
  const char* keeps;              // in words, for docs/security.md
  std::vector<std::string> kept;  // "SELECT count(*) ..." that must not drop
  std::vector<std::string> zero;  // queries that must stay 0
};

std::vector<DefinerPlan> DefinerPlans() {
  const char* young_keys = "SELECT count(*) FROM idempotency_keys";
  return {
      {Service::kAdmin, "idempotency_retention", "no key younger than a minute", {young_keys}, {}},
      {Service::kAdmin,
       "inbox_retention",
       "no inbox row but PROCESSED ones older than 48 h",
       {"SELECT count(*) FROM consumer_inbox"},
       {}},
      {Service::kAdmin,
       "poison_retention",
       "no unresolved entry younger than 30 days, no resolved one younger than an hour",
       {"SELECT count(*) FROM poison_events"},
       {}},
      {Service::kAdmin,
       "log_queue_done",
       "every audit row stays a leaf or queued",
       {},
       {"SELECT count(*) FROM audit_logs a WHERE NOT EXISTS (SELECT 1 FROM log_leaves l"
        " WHERE l.event_id = a.event_id) AND NOT EXISTS (SELECT 1 FROM log_queue q"
        " WHERE q.event_id = a.event_id)"}},
      {Service::kAdmin,
       "erase_personal_data",
       "no value and no erasure without the erasure's record in the log",
       {"SELECT count(*) FROM personal_values", "SELECT count(*) FROM personal_erasures"},
       {}},
      {Service::kAuth, "idempotency_retention", "no key younger than a minute", {young_keys}, {}},
      {Service::kAuth,
       "outbox_retention",
       "no row unconfirmed, younger than an hour, or above the attested number mark",
       {"SELECT count(*) FROM audit_outbox"},
       {}},
      {Service::kAuth,
       "erase_personal_data",
       "no value and no erasure without the erasure's own event in the outbox, on its way to the "
       "log",
       {"SELECT count(*) FROM audit_outbox_personal", "SELECT count(*) FROM personal_erasures"},
       {}},
  };
}

// Generated arguments of a PostgreSQL type: the edges and some honest values.
std::string ArgumentOf(const std::string& type, std::mt19937& rng,
                       const std::vector<std::string>& subjects,
                       const std::vector<std::string>& event_ids) {
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  if (type == "double precision") {
    return pick({"NULL", "'NaN'", "'Infinity'", "'-Infinity'", "-1e308", "0", "59", "1e12"}) +
           "::float8";
  }
  if (type == "integer") return pick({"NULL", "-1", "0", "1", "2147483647"}) + "::integer";
  if (type == "timestamp with time zone") {
    return pick({"NULL", "'infinity'", "'-infinity'", "now()", "now() + interval '1 year'",
                 "now() - interval '1 year'"}) +
           "::timestamptz";
  }
  if (type == "uuid") {
    return pick({"NULL", "gen_random_uuid()", "'" + pick(event_ids) + "'"}) + "::uuid";
  }
  if (type == "uuid[]") {
    return pick({"NULL", "'{}'", "ARRAY[gen_random_uuid()]",
                 "(SELECT array_agg(event_id) FROM audit_logs)",
                 "ARRAY['" + pick(event_ids) + "']"}) +
           "::uuid[]";
  }
  return pick({"NULL", "''", "' '", "'a b'", "repeat('x', 300)", "'x'", "'" + pick(subjects) + "'",
               "'" + pick(subjects) + "'"}) +
         "::text";
}

// Every SECURITY DEFINER function each runtime role may execute, called by
// that role with generated arguments (ULTICODE_DEFINER_SEED reproduces a
// run): refused, or what its plan protects is intact. A definer function
// without a plan fails the test.
TEST_F(LeastPrivilegeTest, EveryDefinerFunctionKeepsItsFloorWhateverItsRoleCallsItWith) {
  std::mt19937 rng(testing::SeedFromEnv("ULTICODE_DEFINER_SEED", "definer functions"));
  std::vector<std::string> made;
  for (int i = 0; i < 3; ++i) {
    auto id = testing::CreateUser(*mesh_, absl::StrCat("definer", i, testing::RandomSuffix()));
    ASSERT_TRUE(id.ok()) << id.status();
    made.push_back(*id);
  }
  std::map<Service, std::unique_ptr<pg::Connection>> super, runtime;
  for (Service s : {Service::kAdmin, Service::kAuth}) {
    pg::ConnectOptions o;
    o.conninfo = mesh_->Dsn(s);
    super[s] = pg::Connection::Connect(o).value();
    auto r = AsRuntime(s, s);
    ASSERT_TRUE(r.ok()) << r.status();
    runtime[s] = *std::move(r);
    // Young rows in every table a retention function reaches.
    ASSERT_TRUE(Exec(*super[s],
                     "INSERT INTO idempotency_keys (principal, request_id, method,"
                     " request_sha256, response) VALUES ('p', 'r', 'm', '', '')")
                    .ok());
  }
  ASSERT_TRUE(Exec(*super[Service::kAdmin],
                   "INSERT INTO poison_events (consumer, stream, stream_entry_id, reason, detail,"
                   " fields) VALUES ('c', 's', '1-1', 'r', 'd', '[]')")
                  .ok());
  pg::Connection& admin = *super[Service::kAdmin];
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return testing::QueryInt(admin, "SELECT count(*) FROM audit_logs") >= 3 &&
               testing::QueryInt(admin, "SELECT count(*) FROM personal_values") > 0;
      },
      std::chrono::seconds(30)));
  const std::vector<std::string> subjects = absl::StrSplit(
      testing::QueryText(admin, "SELECT string_agg(DISTINCT subject, ',') FROM personal_values"),
      ',');
  const std::vector<std::string> events = absl::StrSplit(
      testing::QueryText(admin, "SELECT string_agg(event_id::text, ',') FROM audit_logs"), ',');

  const std::vector<DefinerPlan> plans = DefinerPlans();
  std::vector<bool> tried(plans.size(), false);
  for (Service s : {Service::kAdmin, Service::kAuth}) {
    pg::Connection& db = *super[s];
    const std::string role = mesh_->RuntimeRole(s);
    // name:arg types;... of every definer function the role may execute.
    const std::string functions = testing::QueryText(
        db, absl::StrCat("SELECT coalesce(string_agg(f.proname || ':' ||"
                         " pg_get_function_identity_arguments(f.oid), ';'), '') FROM pg_proc f"
                         " WHERE f.prosecdef AND has_function_privilege('",
                         role, "', f.oid, 'EXECUTE') AND f.pronamespace = 'public'::regnamespace"));
    for (absl::string_view entry : absl::StrSplit(functions, ';', absl::SkipEmpty())) {
      const std::pair<std::string, std::string> f = absl::StrSplit(entry, absl::MaxSplits(':', 1));
      const auto plan = std::find_if(plans.begin(), plans.end(), [&](const DefinerPlan& p) {
        return p.db == s && f.first == p.function;
      });
      if (plan == plans.end()) {
        ADD_FAILURE() << role << " may execute " << entry << ", which has no plan here";
        continue;
      }
      tried[plan - plans.begin()] = true;
      std::vector<std::string> types;
      for (absl::string_view arg : absl::StrSplit(f.second, ", ", absl::SkipEmpty())) {
        types.push_back(std::string(arg.substr(arg.find(' ') + 1)));  // "name type"
      }
      for (int call = 0; call < 16; ++call) {
        std::vector<std::string> args;
        for (const std::string& t : types) args.push_back(ArgumentOf(t, rng, subjects, events));
        const std::string sql =
            absl::StrCat("SELECT ", f.first, "(", absl::StrJoin(args, ", "), ")");
        std::vector<int64_t> before;
        for (const std::string& q : plan->kept) before.push_back(testing::QueryInt(db, q));
        const absl::Status ran = runtime[s]->ExecuteScript("definer", sql, absl::Seconds(10));
        SCOPED_TRACE(absl::StrCat(role, ": ", sql, " -> ", ran.ToString()));
        for (size_t i = 0; i < plan->kept.size(); ++i) {
          EXPECT_GE(testing::QueryInt(db, plan->kept[i]), before[i]) << plan->kept[i];
        }
        for (const std::string& q : plan->zero) EXPECT_EQ(testing::QueryInt(db, q), 0) << q;
      }
    }
  }
  for (size_t i = 0; i < plans.size(); ++i) {
    EXPECT_TRUE(tried[i]) << plans[i].function << ": planned, but no runtime role may execute it";
  }
}

// The catalogue as docs/security.md shows it: a row per runtime role, from
// kCatalogue and DefinerPlans.
std::string CatalogueTable() {
  std::string out =
      "| runtime role | writes | reads only | SECURITY DEFINER functions: what each keeps, "
      "whatever the role passes |\n|---|---|---|---|\n";
  const std::vector<DefinerPlan> plans = DefinerPlans();
  for (const auto& [s, privileges] : kCatalogue) {
    std::map<std::string, std::vector<std::string>> writes;   // table: privileges
    std::map<std::string, std::vector<std::string>> columns;  // "table PRIV": columns
    std::vector<std::string> reads, functions;
    for (absl::string_view p : absl::StrSplit(privileges, ' ', absl::SkipEmpty())) {
      const std::pair<std::string, std::string> o = absl::StrSplit(p, ':');
      if (o.second == "definer") {
        const Service db = s == Service::kAdmin ? Service::kAdmin : Service::kAuth;
        const auto plan = std::find_if(plans.begin(), plans.end(), [&](const DefinerPlan& d) {
          return d.db == db && o.first == d.function;
        });
        functions.push_back(
            absl::StrCat("`", o.first, "`: ", plan == plans.end() ? "(no plan)" : plan->keeps));
      } else if (o.second == "SELECT") {
        reads.push_back(o.first);
      } else if (const size_t paren = o.first.find('('); paren != std::string::npos) {
        // A column grant: "table(a, b) update", one entry per table and privilege.
        columns[absl::StrCat(o.first.substr(0, paren), " ", o.second)].push_back(
            o.first.substr(paren + 1, o.first.size() - paren - 2));
      } else {
        writes[o.first].push_back(absl::AsciiStrToLower(o.second));
      }
    }
    std::vector<std::string> written, read_only;
    for (const auto& [table, what] : writes) {
      written.push_back(absl::StrCat("`", table, "` ", absl::StrJoin(what, "/")));
    }
    for (const auto& [table_privilege, names] : columns) {
      const std::pair<std::string, std::string> tp = absl::StrSplit(table_privilege, ' ');
      written.push_back(absl::StrCat("`", tp.first, "(", absl::StrJoin(names, ", "), ")` ",
                                     absl::AsciiStrToLower(tp.second)));
    }
    for (const std::string& table : reads) {
      if (!writes.count(table)) read_only.push_back(absl::StrCat("`", table, "`"));
    }
    absl::StrAppend(&out, "| ",
                    s == Service::kAdmin  ? "Admin"
                    : s == Service::kAuth ? "Auth"
                                          : "App",
                    " | ", absl::StrJoin(written, ", "), " | ", absl::StrJoin(read_only, ", "),
                    " | ", absl::StrJoin(functions, "; "), " |\n");
  }
  return out;
}

// docs/security.md shows the catalogue this test holds the database to,
// between its markers; ULTICODE_UPDATE_DOCS=1 writes it there.
TEST(SecurityDocTest, TheCatalogueInTheDocsIsTheTestsOwn) {
  const std::string path = testing::SourceDir() + "/docs/security.md";
  std::ifstream in(path);
  std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string begin = "<!-- catalogue: begin -->\n", end = "<!-- catalogue: end -->";
  const size_t from = doc.find(begin), to = doc.find(end);
  ASSERT_NE(from, std::string::npos) << path << " lacks " << begin;
  ASSERT_NE(to, std::string::npos) << path << " lacks " << end;
  const std::string want = CatalogueTable();
  const std::string have = doc.substr(from + begin.size(), to - from - begin.size());
  if (have != want && std::getenv("ULTICODE_UPDATE_DOCS") != nullptr) {
    doc.replace(from + begin.size(), to - from - begin.size(), want);
    std::ofstream(path, std::ios::trunc) << doc;
    return;
  }
  EXPECT_EQ(have, want) << "docs/security.md's catalogue is not the test's: run "
                           "ULTICODE_UPDATE_DOCS=1 scripts/test.sh -R least_privilege_test";
}

TEST_F(LeastPrivilegeTest, NoServiceRoleCanConnectToAnotherServicesDatabase) {
  for (Service who : {Service::kAuth, Service::kApp, Service::kAdmin}) {
    for (Service where : {Service::kAuth, Service::kApp, Service::kAdmin}) {
      auto conn = AsRuntime(who, where);
      if (who == where) {
        EXPECT_TRUE(conn.ok()) << conn.status();
        continue;
      }
      ASSERT_FALSE(conn.ok()) << mesh_->RuntimeRole(who) << " reached another database";
      EXPECT_NE(std::string(conn.status().message()).find("permission denied for database"),
                std::string::npos)
          << conn.status();
    }
  }
}

TEST_F(LeastPrivilegeTest, OwnerRuntimeRolesHaveOnlyTheirDml) {
  auto auth = AsRuntime(Service::kAuth, Service::kAuth);
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_TRUE(Exec(**auth, "SELECT count(*) FROM users").ok());
  for (const char* sql :
       {"DELETE FROM audit_outbox", "DELETE FROM users", "TRUNCATE users",
        "DELETE FROM idempotency_keys", "UPDATE roles SET description = ''", "DROP TABLE users",
        "CREATE TABLE shadow (x int)", "DELETE FROM schema_migrations",
        "SELECT setval('audit_outbox_sequence', 1)", "UPDATE audit_outbox SET owner_sequence = 1",
        "DELETE FROM outbox_numbers_attested"}) {
    absl::Status s = Exec(**auth, sql);
    EXPECT_NE(std::string(s.message()).find("42501"), std::string::npos) << sql << ": " << s;
  }
}

// The owner's runtime login can move a row along the delivery state machine
// and nothing else: the signed event is not its to rewrite, a confirmation
// needs a publication and carries the database's clock, and retention keeps
// a confirmed row at least an hour whatever it is asked. (Before: UPDATE
// covered every column, and a row confirmed "30 days ago" was deleted at
// once.)
TEST_F(LeastPrivilegeTest, OwnerRuntimeRoleCannotRewriteOrBackdateOutboxRows) {
  auto auth = AsRuntime(Service::kAuth, Service::kAuth);
  ASSERT_TRUE(auth.ok()) << auth.status();
  // PUBLISHED rows wait for their proof: the dispatcher leaves them alone.
  ASSERT_TRUE(Exec(**auth,
                   "INSERT INTO audit_outbox (event_id, event_type, payload, mac, key_id, state,"
                   " created_at, published_at, publication) VALUES"
                   " ('0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a51', 'auth.user.created', '\\x01',"
                   " decode(repeat('00', 32), 'hex'), 'k',"
                   " 'PUBLISHED', now() - interval '30 days', now() - interval '30 days', 1),"
                   " ('0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a52', 'auth.user.created', '\\x02',"
                   " decode(repeat('00', 32), 'hex'), 'k',"
                   " 'PUBLISHED', now() - interval '30 days', now() - interval '30 days', 0)")
                  .ok());
  for (const char* set :
       {"payload = '\\x00'", "mac = '\\x00'", "key_id = 'k'", "created_at = now()",
        "event_type = 'auth.user.disabled'", "event_id = '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a59'"}) {
    absl::Status s = Exec(**auth, absl::StrCat("UPDATE audit_outbox SET ", set));
    EXPECT_NE(std::string(s.message()).find("42501"), std::string::npos) << set << ": " << s;
  }
  const std::string first = " WHERE event_id = '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a51'";
  const std::string second = " WHERE event_id = '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a52'";
  for (const std::string& sql : {
           "UPDATE audit_outbox SET state = 'CONFIRMED'" + second,  // never published
           "UPDATE audit_outbox SET publication = 0" + first,       // numbers only grow
       }) {
    absl::Status s = Exec(**auth, sql);
    EXPECT_NE(std::string(s.message()).find("23514"), std::string::npos) << sql << ": " << s;
  }
  ASSERT_TRUE(Exec(**auth, "UPDATE audit_outbox SET state = 'DEAD'" + second).ok());
  absl::Status revived = Exec(**auth, "UPDATE audit_outbox SET state = 'PUBLISHED'" + second);
  EXPECT_NE(std::string(revived.message()).find("23514"), std::string::npos) << revived;
  // A back-dated confirmation gets the database's clock, so retention asked
  // to keep nothing still keeps it.
  ASSERT_TRUE(Exec(**auth,
                   "UPDATE audit_outbox SET state = 'CONFIRMED', confirmed_at = now() -"
                   " interval '30 days'" +
                       first)
                  .ok());
  EXPECT_EQ(testing::QueryInt(**auth, "SELECT count(*) FROM audit_outbox" + first +
                                          " AND confirmed_at > now() - interval '1 minute'"),
            1);
  EXPECT_EQ(testing::QueryInt(**auth, "SELECT outbox_retention(0, 10000)"), 0);
  EXPECT_EQ(testing::QueryInt(**auth, "SELECT count(*) FROM audit_outbox" + first), 1);
}

// The number attestation is the owner's word that a number was never
// committed; its runtime login cannot bend it: the mark never moves back or
// past the numbers handed out, a no-op UPDATE does not make a stalled
// attestation look fresh, and retention deletes no row above the mark, so
// an event kept from Admin (CONFIRMED without publication's proof) keeps
// its row until the attestor has passed its number, and is never voided.
// (Before: the no-op UPDATE refreshed attested_at, and retention deleted the
// kept row an hour after its confirmation, whatever the mark.)
TEST_F(LeastPrivilegeTest, OwnerRuntimeRoleCannotBendTheNumberAttestation) {
  auto auth = AsRuntime(Service::kAuth, Service::kAuth);
  ASSERT_TRUE(auth.ok()) << auth.status();
  const int64_t taken = testing::QueryInt(**auth, "SELECT nextval('audit_outbox_sequence')");
  ASSERT_TRUE(Exec(**auth, absl::StrCat("INSERT INTO outbox_numbers_attested (through, attested_at)"
                                        " VALUES (",
                                        taken, ", now()) ON CONFLICT DO NOTHING"))
                  .ok());
  ASSERT_TRUE(
      Exec(**auth, absl::StrCat("UPDATE outbox_numbers_attested SET through = ", taken)).ok());
  const std::string at = "SELECT attested_at::text FROM outbox_numbers_attested";
  const std::string attested = testing::QueryText(**auth, at);
  for (const char* sql :
       {"UPDATE outbox_numbers_attested SET through = through",
        "UPDATE outbox_numbers_attested SET attested_at = now() + interval '1 d'"}) {
    ASSERT_TRUE(Exec(**auth, sql).ok()) << sql;
    EXPECT_EQ(testing::QueryText(**auth, at), attested) << sql << " refreshed the attestation";
  }
  for (const std::string& sql :
       {absl::StrCat("UPDATE outbox_numbers_attested SET through = ", taken + 1000),
        std::string("UPDATE outbox_numbers_attested SET through = through - 1")}) {
    absl::Status s = Exec(**auth, sql);
    EXPECT_NE(std::string(s.message()).find("23514"), std::string::npos) << sql << ": " << s;
  }

  // A committed event above the mark, kept from Admin and confirmed a day
  // ago (back-dated by the superuser, as if the attestor had been held off).
  const int64_t kept = testing::QueryInt(**auth, "SELECT nextval('audit_outbox_sequence')");
  const std::string row = " WHERE event_id = '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a61'";
  ASSERT_TRUE(Exec(**auth, absl::StrCat("INSERT INTO audit_outbox (event_id, event_type, payload,"
                                        " mac, key_id, state, publication, owner_sequence) VALUES"
                                        " ('0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a61',"
                                        " 'auth.user.created', '\\x01',"
                                        " decode(repeat('00', 32), 'hex'), 'k', 'PUBLISHED', 1, ",
                                        kept, ")"))
                  .ok());
  ASSERT_TRUE(Exec(**auth, "UPDATE audit_outbox SET state = 'CONFIRMED'" + row).ok());
  pg::ConnectOptions super;
  super.conninfo = mesh_->Dsn(Service::kAuth);
  auto root = pg::Connection::Connect(super);
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_TRUE(Exec(**root, "SET session_replication_role = replica").ok());
  ASSERT_TRUE(Exec(**root,
                   "UPDATE audit_outbox SET created_at = now() - interval '1 day',"
                   " confirmed_at = now() - interval '1 day'" +
                       row)
                  .ok());
  EXPECT_EQ(testing::QueryInt(**auth, "SELECT outbox_retention(0, 10000)"), 0);
  EXPECT_EQ(testing::QueryInt(**auth, "SELECT count(*) FROM audit_outbox" + row), 1)
      << "retention deleted a row the attestor has not passed";
  // Once the mark passes it (the attestor found its row), it may go.
  ASSERT_TRUE(
      Exec(**auth, absl::StrCat("UPDATE outbox_numbers_attested SET through = ", kept)).ok());
  EXPECT_EQ(testing::QueryInt(**auth, "SELECT outbox_retention(0, 10000)"), 1);
}

TEST_F(LeastPrivilegeTest, RuntimeRolesNeedTheirScramPassword) {
  auto wrong = AsRuntime(Service::kAuth, Service::kAuth, "not-the-password");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(std::string(wrong.status().message()).find("password authentication failed"),
            std::string::npos)
      << wrong.status();
  EXPECT_EQ(std::string(wrong.status().message()).find("not-the-password"), std::string::npos);
}

TEST_F(LeastPrivilegeTest, RedisUsersTouchOnlyTheirOwnKeys) {
  // Users like the mesh's, on streams of this test alone.
  const std::string p = "lpr:" + testing::RandomSuffix();
  const std::string auth_stream = p + ":audit:auth", app_stream = p + ":audit:app";
  std::vector<bootstrap::RedisUser> users = {
      {p + "-auth", bootstrap::RedisRole::kOwner, bootstrap::NewPassword(), {auth_stream}},
      {p + "-admin",
       bootstrap::RedisRole::kAdmin,
       bootstrap::NewPassword(),
       {auth_stream, app_stream}},
      {p + "-ops", bootstrap::RedisRole::kOps, bootstrap::NewPassword(), {}}};
  redis::Options super;
  super.host = redis_.host;
  super.port = redis_.port;
  super.user = redis_.user;
  super.password = redis_.password;
  redis::Client root(super);
  ASSERT_TRUE(bootstrap::ApplyAcl(root, users).ok());
  auto as = [&](const bootstrap::RedisUser& u) {
    redis::Options o = super;
    o.user = u.name;
    o.password = u.password;
    return std::make_unique<redis::Client>(o);
  };
  auto denied = [](redis::Client& c, std::vector<std::string> cmd) {
    auto r = c.Command(cmd);
    return !r.ok() && r.status().code() == absl::StatusCode::kPermissionDenied;
  };
  auto auth = as(users[0]);
  EXPECT_TRUE(auth->Command({"XADD", auth_stream, "*", "k", "v"}).ok());
  EXPECT_TRUE(auth->Command({"XREAD", "STREAMS", auth_stream + ":proofs", "0"}).ok());
  EXPECT_TRUE(denied(*auth, {"XADD", app_stream, "*", "k", "v"}));
  EXPECT_TRUE(denied(*auth, {"XADD", auth_stream + ":proofs", "*", "k", "v"}));
  EXPECT_TRUE(denied(*auth, {"XADD", app_stream + ":proofs", "*", "k", "v"}));
  // Its own entries, to delete those an erasure covers (personal_erasure.h).
  EXPECT_TRUE(auth->Command({"XREAD", "STREAMS", auth_stream, "0"}).ok());
  EXPECT_TRUE(denied(*auth, {"XREAD", "STREAMS", app_stream, "0"}));
  EXPECT_TRUE(denied(*auth, {"XDEL", app_stream, "0-1"}));
  // It may look at what Admin's group acknowledged of its own stream, and
  // what was removed unread (outbox/resend.h), on no other stream.
  EXPECT_TRUE(auth->Command({"XINFO", "STREAM", auth_stream}).ok());
  EXPECT_TRUE(auth->Command({"XINFO", "GROUPS", auth_stream}).ok());
  EXPECT_TRUE(denied(*auth, {"XINFO", "STREAM", app_stream}));
  EXPECT_TRUE(denied(*auth, {"XINFO", "GROUPS", app_stream}));
  EXPECT_FALSE(denied(*auth, {"XPENDING", auth_stream, "admin-audit"}));
  EXPECT_TRUE(denied(*auth, {"XPENDING", app_stream, "admin-audit"}));
  EXPECT_TRUE(denied(*auth, {"XRANGE", auth_stream, "-", "+"}));
  EXPECT_FALSE(denied(*auth, {"XDEL", auth_stream, "0-1"}));
  EXPECT_TRUE(denied(*auth, {"FLUSHALL"}));
  EXPECT_TRUE(denied(*auth, {"CONFIG", "GET", "maxmemory"}));
  EXPECT_TRUE(denied(*auth, {"XGROUP", "DESTROY", auth_stream, "admin-audit"}));
  EXPECT_TRUE(denied(*auth, {"DEL", auth_stream}));
  EXPECT_TRUE(denied(*auth, {"XTRIM", auth_stream, "MAXLEN", "0"}));
  EXPECT_TRUE(denied(*auth, {"XSETID", auth_stream, "9999999999999-0"}));
  EXPECT_TRUE(denied(*auth, {"FUNCTION", "LOAD",
                             "#!lua name=x\nredis.register_function('f',"
                             " function() return 1 end)"}));
  // What no Redis ACL takes from a user that may XADD (rules do not look at
  // arguments, and what a function runs is checked against its caller):
  // trimming its own stream within the XADD, and choosing the entry id. Both
  // touch only the owner's own stream; docs/security.md says what follows.
  EXPECT_TRUE(auth->Command({"XADD", auth_stream, "MAXLEN", "0", "*", "k", "v"}).ok());
  EXPECT_TRUE(
      auth->Command({"XADD", auth_stream, "18446744073709551615-18446744073709551615", "k", "v"})
          .ok());
  auto exhausted = auth->Command({"XADD", auth_stream, "*", "k", "v"});
  EXPECT_FALSE(exhausted.ok());
  EXPECT_NE(std::string(exhausted.status().message()).find("exhausted"), std::string::npos)
      << exhausted.status();
  // The ops user repairs it (docs/runbook.md, "UlticodeOutboxNotPublishing").
  auto repair = as(users[2]);
  EXPECT_TRUE(repair->Command({"DEL", auth_stream}).ok());
  EXPECT_TRUE(auth->Command({"XADD", auth_stream, "*", "k", "v"}).ok());

  auto admin = as(users[1]);
  EXPECT_TRUE(admin->Command({"XGROUP", "CREATE", auth_stream, "g", "0", "MKSTREAM"}).ok());
  EXPECT_TRUE(admin->Command({"XREADGROUP", "GROUP", "g", "c", "STREAMS", auth_stream, ">"}).ok());
  EXPECT_TRUE(admin->Command({"XADD", auth_stream + ":proofs", "*", "k", "v"}).ok());
  EXPECT_TRUE(denied(*admin, {"XADD", auth_stream, "*", "k", "v"})) << "Admin never writes events";
  EXPECT_TRUE(denied(*admin, {"XGROUP", "DESTROY", auth_stream, "g"}));
  // Trimming (up to what every group acknowledged) is Admin's job; a rogue
  // Admin trimming more loses nothing: unconfirmed rows are re-sent.
  EXPECT_TRUE(admin->Command({"XTRIM", auth_stream, "MINID", "0"}).ok());
  // Proof streams are Admin's to keep within their share.
  EXPECT_TRUE(admin->Command({"XTRIM", app_stream + ":proofs", "MAXLEN", "~", "1000"}).ok());
  EXPECT_TRUE(admin->Command({"MEMORY", "USAGE", app_stream + ":proofs", "SAMPLES", "0"}).ok());
  // Owner-writable streams are measured without reading what the owner wrote
  // (XINFO STREAM answers with whole entries), held to their share, and the
  // owners' cosignatures trimmed once read; Admin's connections stay open
  // when Redis frees client memory. The owners may do none of that.
  const std::string cosignatures = auth_stream + ":cosignatures";
  EXPECT_TRUE(denied(*admin, {"XINFO", "STREAM", auth_stream}));
  EXPECT_TRUE(admin->Command({"XLEN", auth_stream}).ok());
  EXPECT_TRUE(admin->Command({"MEMORY", "USAGE", auth_stream, "SAMPLES", "0"}).ok());
  EXPECT_TRUE(admin->Command({"XLEN", cosignatures}).ok());
  EXPECT_TRUE(admin->Command({"XTRIM", cosignatures, "MINID", "0"}).ok());
  EXPECT_TRUE(admin->Command({"CLIENT", "NO-EVICT", "on"}).ok());
  EXPECT_TRUE(denied(*admin, {"XADD", cosignatures, "*", "k", "v"}));
  EXPECT_TRUE(denied(*auth, {"CLIENT", "NO-EVICT", "on"}));
  EXPECT_TRUE(denied(*auth, {"MEMORY", "USAGE", auth_stream}));
  EXPECT_TRUE(denied(*admin, {"XDEL", app_stream + ":proofs", "0-1"}));
  EXPECT_TRUE(denied(*admin, {"DEL", app_stream + ":proofs"}));
  EXPECT_TRUE(denied(*admin, {"FLUSHALL"}));

  auto ops = as(users[2]);
  EXPECT_TRUE(ops->Command({"XLEN", auth_stream}).ok());
  EXPECT_TRUE(denied(*ops, {"FLUSHALL"}));
  EXPECT_TRUE(denied(*ops, {"CONFIG", "SET", "appendonly", "no"}));
  EXPECT_TRUE(denied(*ops, {"ACL", "SETUSER", users[0].name, "+@all"}));
  for (const auto& u : users) (void)root.Command({"ACL", "DELUSER", u.name});
  (void)root.Command({"DEL", auth_stream, auth_stream + ":proofs"});
}

// As deploy/k8s runs a service: an init step migrates with the migration
// role's password and nothing else (no signing key, TLS or JWKS), and the
// server then runs --migrate=verify without any migration credential,
// refusing a database whose schema is missing or behind.
TEST(MigrateStepTest, InitStepMigratesAndTheServerOnlyVerifies) {
  ULTI_REQUIRE_PG(pg);
  ULTI_REQUIRE_REDIS(redis);
  testing::MeshOptions options;
  options.prefix = "ms";
  options.migrate_step = true;
  options.admin_args = options.auth_args = {"--startup-timeout=2s"};
  Mesh mesh(pg, redis, options);
  std::string error;
  EXPECT_FALSE(mesh.StartServer(Service::kAdmin, 0, &error)) << "verify on an empty database";
  EXPECT_NE(error.find("no schema_migrations: run the migration step first"), std::string::npos)
      << error;

  for (Service s : {Service::kAuth, Service::kAdmin})
    ASSERT_TRUE(mesh.Start(s, 0, &error)) << error;
  std::ifstream cmdline(absl::StrCat("/proc/", mesh.Pid(Service::kAuth, 0), "/cmdline"));
  std::string args((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  EXPECT_NE(args.find("--migrate=verify"), std::string::npos);
  EXPECT_EQ(args.find("migrator"), std::string::npos) << "no migration credential in the server";
  // The init step again (the next pod of a rollout) finds nothing to do.
  pg::ConnectOptions as_superuser;
  as_superuser.conninfo = mesh.Dsn(Service::kAuth);
  auto superuser = pg::Connection::Connect(as_superuser);
  ASSERT_TRUE(superuser.ok()) << superuser.status();
  const std::string applied_sql =
      "SELECT count(*) || ' ' || max(applied_at)::text FROM schema_migrations";
  const std::string applied = testing::QueryText(**superuser, applied_sql);
  auto again = mesh.MigrateOnly(Service::kAuth);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(testing::QueryText(**superuser, applied_sql), applied);

  EXPECT_EQ(mesh.Terminate(Service::kAuth, 0), 0);
  ASSERT_TRUE((*superuser)
                  ->Execute({"behind",
                             "DELETE FROM schema_migrations WHERE version = "
                             "(SELECT max(version) FROM schema_migrations)"})
                  .ok());
  EXPECT_FALSE(mesh.StartServer(Service::kAuth, 0, &error)) << "verify on a schema behind";
  EXPECT_NE(error.find("the schema is behind this binary"), std::string::npos) << error;
  mesh.Terminate(Service::kAdmin, 0);
}

}  // namespace
}  // namespace ulticode
