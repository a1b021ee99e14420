// common/migrations against a real PostgreSQL 15.
#include "common/migrations/migrations.h"

#include <thread>

#include "common/runtime/startup.h"
#include "gtest/gtest.h"
#include "tests/support/pg_query.h"
#include "tests/support/test_env.h"

namespace ulticode::migrations {
namespace {

std::vector<Migration> TwoMigrations() {
  return {
      {2, "0002_add_column", "sum2", "ALTER TABLE things ADD COLUMN note text;"},
      // The first migration sleeps so that a concurrent applier really waits.
      {1, "0001_create", "sum1",
       "CREATE TABLE things (id bigint PRIMARY KEY); SELECT pg_sleep(0.3);"},
  };
}

class MigrationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    options_.conninfo = pg.ConnInfo(::ulticode::testing::CreateScratchDatabase(pg, "migtest"));
  }
  std::unique_ptr<pg::Connection> Connect() {
    auto c = pg::Connection::Connect(options_);
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(c).value();
  }
  pg::ConnectOptions options_;
};

TEST_F(MigrationsTest, AppliesInOrderOnceAndSecondRunIsNoOp) {
  auto conn = Connect();
  auto first = Apply(*conn, TwoMigrations());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->applied, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(first->current_version, 2);

  auto second = Apply(*conn, TwoMigrations());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->applied.empty());
  EXPECT_EQ(second->current_version, 2);

  auto rows = conn->Execute({"rows", "SELECT version FROM schema_migrations ORDER BY version"});
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->rows(), 2);
  auto col = conn->Execute({"col", "SELECT note FROM things"});
  EXPECT_TRUE(col.ok()) << col.status();
}

TEST_F(MigrationsTest, ConcurrentAppliersSerialize) {
  absl::StatusOr<ApplyResult> a, b;
  std::thread ta([&] {
    auto c = Connect();
    a = Apply(*c, TwoMigrations());
  });
  std::thread tb([&] {
    auto c = Connect();
    b = Apply(*c, TwoMigrations());
  });
  ta.join();
  tb.join();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  // Exactly one of them did the work; the other found nothing to do.
  EXPECT_EQ(a->applied.size() + b->applied.size(), 2u);
  EXPECT_TRUE(a->applied.empty() || b->applied.empty());
  EXPECT_EQ(a->current_version, 2);
  EXPECT_EQ(b->current_version, 2);
}

TEST_F(MigrationsTest, FailingMigrationLeavesNothingBehind) {
  auto conn = Connect();
  std::vector<Migration> bad = {
      {1, "0001_ok", "s1", "CREATE TABLE ok_table (id int);"},
      {2, "0002_broken", "s2", "CREATE TABLE broken (id int); SELECT no_such_function();"},
  };
  auto r = Apply(*conn, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("0002_broken"), absl::string_view::npos) << r.status();
  auto t = conn->Execute({"t",
                          "SELECT to_regclass('ok_table') IS NULL, "
                          "to_regclass('schema_migrations') IS NULL"});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->GetBool(0, 0));
  EXPECT_TRUE(t->GetBool(0, 1));
}

TEST_F(MigrationsTest, EditedMigrationIsRefused) {
  auto conn = Connect();
  ASSERT_TRUE(Apply(*conn, TwoMigrations()).ok());
  auto edited = TwoMigrations();
  edited[1].sha256 = "different";
  auto r = Apply(*conn, edited);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(MigrationsTest, GrantRuntimeGrantsExactlyTheListRevokingEarlierGrants) {
  auto conn = Connect();
  ASSERT_TRUE(Apply(*conn, TwoMigrations()).ok());
  const std::string role = "mig_rt_" + ::ulticode::testing::RandomSuffix();
  auto exec = [&](const std::string& sql) {
    return conn->Execute(pg::Statement{"t", sql.c_str()}).status();
  };
  ASSERT_TRUE(exec("CREATE ROLE " + role).ok());
  // An earlier version granted more.
  ASSERT_TRUE(exec("GRANT SELECT, INSERT, UPDATE, DELETE ON things TO " + role).ok());
  ASSERT_TRUE(
      GrantRuntime(*conn, role, {"GRANT SELECT, INSERT ON things TO {role}"}, TwoMigrations())
          .ok());
  auto privileges = [&](const std::string& p) {
    return ::ulticode::testing::QueryText(
        *conn, "SELECT has_table_privilege('" + role + "', 'things', '" + p + "')::text");
  };
  EXPECT_EQ(privileges("SELECT"), "true");
  EXPECT_EQ(privileges("INSERT"), "true");
  EXPECT_EQ(privileges("UPDATE"), "false");
  EXPECT_EQ(privileges("DELETE"), "false");
  EXPECT_EQ(GrantRuntime(*conn, "Robert'); DROP", {}, TwoMigrations()).code(),
            absl::StatusCode::kInvalidArgument);
  // It may read the applied versions (what --migrate=verify checks), no more.
  EXPECT_EQ(
      ::ulticode::testing::QueryText(*conn, "SELECT has_table_privilege('" + role +
                                                "', 'schema_migrations', "
                                                "'SELECT')::text || has_table_privilege('" +
                                                role + "', 'schema_migrations', 'INSERT')::text"),
      "truefalse");
}

// A rollout: v2 added a table (migration 2) and its grant; a pod of v1 that
// starts late (rescheduled, scaled) must not revoke it. Versions come in two
// ranges, as an owner's own (1, 2, ...) and the outbox's (10001, ...) do.
TEST_F(MigrationsTest, AnOlderBinaryLeavesTheNewerSchemasGrants) {
  auto conn = Connect();
  const std::string role = "mig_rt_" + ::ulticode::testing::RandomSuffix();
  ASSERT_TRUE(conn->Execute(pg::Statement{"r", ("CREATE ROLE " + role).c_str()}).ok());
  const Migration things{1, "0001_things", "s1", "CREATE TABLE things (id bigint);"};
  const Migration more{2, "0002_more", "s2", "CREATE TABLE more_things (id bigint);"};
  const Migration outbox{10001, "10001_outbox", "s10001", "CREATE TABLE outbox (id bigint);"};
  const std::vector<Migration> v1 = {things, outbox}, v2 = {things, more, outbox};
  const std::vector<std::string> v1_grants = {"GRANT SELECT ON things, outbox TO {role}"};
  std::vector<std::string> v2_grants = v1_grants;
  v2_grants.push_back("GRANT SELECT ON more_things TO {role}");
  auto can_read_more = [&] {
    return ::ulticode::testing::QueryText(
        *conn, "SELECT has_table_privilege('" + role + "', 'more_things', 'SELECT')::text");
  };

  ASSERT_TRUE(runtime::MigrateWithRetry(options_, v2, absl::Seconds(10), role, v2_grants).ok());
  ASSERT_TRUE(runtime::MigrateWithRetry(options_, v1, absl::Seconds(10), role, v1_grants).ok());
  EXPECT_EQ(can_read_more(), "true") << "v1 revoked v2's grant";
  bool skipped = false;
  ASSERT_TRUE(GrantRuntime(*conn, role, v1_grants, v1, &skipped).ok());
  EXPECT_TRUE(skipped);
  // The release that knows every migration grants exactly its list.
  ASSERT_TRUE(GrantRuntime(*conn, role, v1_grants, v2, &skipped).ok());
  EXPECT_FALSE(skipped);
  EXPECT_EQ(can_read_more(), "false");
}

TEST_F(MigrationsTest, VerifyPassesOnlyWhenEveryMigrationIsAppliedUnchanged) {
  auto conn = Connect();
  auto none = Verify(*conn, TwoMigrations());
  EXPECT_EQ(none.code(), absl::StatusCode::kFailedPrecondition) << none;
  EXPECT_NE(none.message().find("no schema_migrations"), std::string::npos) << none;

  auto first = TwoMigrations();
  first.erase(first.begin());  // only 0001
  ASSERT_TRUE(Apply(*conn, first).ok());
  auto behind = Verify(*conn, TwoMigrations());
  EXPECT_EQ(behind.code(), absl::StatusCode::kFailedPrecondition) << behind;
  EXPECT_NE(behind.message().find("0002_add_column is not applied"), std::string::npos) << behind;

  ASSERT_TRUE(Apply(*conn, TwoMigrations()).ok());
  EXPECT_TRUE(Verify(*conn, TwoMigrations()).ok());
  // An older binary (fewer migrations) runs on a newer schema.
  EXPECT_TRUE(Verify(*conn, first).ok());
  auto edited = TwoMigrations();
  edited[0].sha256 = "different";
  auto changed = Verify(*conn, edited);
  EXPECT_EQ(changed.code(), absl::StatusCode::kFailedPrecondition) << changed;
  EXPECT_NE(changed.message().find("was changed after it was applied"), std::string::npos);
}

}  // namespace
}  // namespace ulticode::migrations
