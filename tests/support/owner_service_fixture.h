// A test fixture that runs one owner gRPC service (Auth or App) in process:
// its own scratch database with the service's and the outbox's migrations, a
// pool, the header principal resolver, a settable fault injected before
// COMMIT, a real gRPC server on a free port and a generated stub.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/audit/event.h"
#include "common/audit/personal.h"
#include "common/crypto/crypto.h"
#include "common/metrics/metrics.h"
#include "common/migrations/migrations.h"
#include "common/server/bearer_resolver.h"
#include "common/server/call_executor.h"
#include "common/server/grpc_server.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "owner/mutation/mutation.h"
#include "owner/outbox/migrations.h"
#include "owner/outbox/outbox_store.h"
#include "tests/support/keys.h"
#include "tests/support/pg_query.h"
#include "tests/support/test_env.h"
#include "tests/support/tokens.h"

namespace ulticode::testing {

// `Impl` is the service implementation, `Service` the generated service
// (e.g. auth::v1::AuthService, for its Stub).
template <typename Impl, typename Service>
class OwnerServiceTest : public ::testing::Test {
 protected:
  // Call as the whole of SetUp(): it may skip or fail the test.
  void StartOwner(const std::vector<migrations::Migration>& service_migrations,
                  const std::string& service_name, const std::string& db_prefix,
                  const server::AccessTable& access_rules) {
    ULTI_REQUIRE_PG(pg);
    pg::PoolOptions po;
    po.connect.conninfo = pg.ConnInfo(CreateScratchDatabase(pg, db_prefix));
    auto conn = pg::Connection::Connect(po.connect);
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = std::move(conn).value();
    std::vector<migrations::Migration> all = service_migrations;
    for (const auto& m : outbox::Migrations()) all.push_back(m);
    ASSERT_TRUE(migrations::Apply(*conn_, all).ok());
    pool_ = std::make_unique<pg::Pool>(po);
    mutation::MutationHooks hooks;
    hooks.before_commit = [this](absl::string_view method) { return fault_(method); };
    hooks.after_commit = [this] { ++wakes_; };
    // The owner's key of the process-wide test keys (Admin-side checks in a
    // test find it in SharedTestKeys().directory()).
    signer_ = &SharedTestKeys().owner(absl::StrContains(service_name, ".app.") ? "app" : "auth");
    resolver_ = std::make_unique<server::BearerTokenResolver>(
        SharedTestTokens().jwks(), jwt::VerifyOptions{kTestIssuer, kTestAudience});
    authorizer_ = std::make_unique<server::Authorizer>(*resolver_, access_rules);
    metrics_ = metrics::Metrics::Unexposed("test");
    calls_ = std::make_unique<server::CallExecutor>(
        server::ExecutorOptions{.threads = 4, .max_calls = 64}, metrics_->registry());
    service_ = std::make_unique<Impl>(*calls_, *pool_, *authorizer_, *signer_, hooks);
    server_ = std::make_unique<server::GrpcServer>(server::PlaintextOptions("127.0.0.1:0", 8),
                                                   metrics_->registry());
    server_->AddService(service_.get(), service_name);
    ASSERT_TRUE(server_->Start().ok());
    stub_ = Service::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                                 grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (server_) server_->Shutdown(absl::Seconds(1));
    // Whatever the test did (faults, errors, no-ops, repeats): the
    // dispatcher was woken once per committed outbox row, and only then.
    if (conn_) EXPECT_EQ(wakes_.load(), OutboxRows()) << "after_commit wake-ups";
  }

  // A call context with a bearer token of `principal` holding every role
  // (no token when empty), 10 s deadline.
  std::unique_ptr<grpc::ClientContext> Ctx(const std::string& principal = "alice") {
    auto ctx = std::make_unique<grpc::ClientContext>();
    if (!principal.empty()) ctx->AddMetadata("authorization", SharedTestTokens().Bearer(principal));
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return ctx;
  }

  int64_t Scalar(const std::string& sql) { return QueryInt(*conn_, sql); }
  int64_t OutboxRows() { return Scalar("SELECT count(*) FROM audit_outbox"); }

  // The event stored in the outbox under `event_id` (exactly one row) as
  // its builder made it: the row's schema_version 2 envelope, checked to
  // carry the MAC of this service's key over the exact payload, with the
  // personal values kept beside it (audit_outbox_personal) put back, each
  // checked to open its commitment.
  audit::AuditEvent Event(const std::string& event_id) {
    audit::AuditEvent stored = StoredEvent(event_id);
    EXPECT_EQ(stored.schema_version(), audit::kSchemaVersion);
    pg::Statement st{"personal",
                     "SELECT path, value, salt FROM audit_outbox_personal"
                     " WHERE event_id = $1::uuid ORDER BY path"};
    auto r = conn_->Execute(st, {pg::Text(event_id)});
    EXPECT_TRUE(r.ok()) << r.status();
    audit::PersonalValues values;
    for (int i = 0; r.ok() && i < r->rows(); ++i) {
      audit::PersonalValue* v = values.add_values();
      v->set_path(r->GetString(i, 0));
      v->set_value(r->GetString(i, 1));
      v->set_salt(r->GetBytes(i, 2));
    }
    std::vector<std::string> refused;
    const std::vector<audit::PersonalValue> opened =
        audit::OpenCommitments(stored, values, &refused);
    EXPECT_TRUE(refused.empty()) << refused[0];
    EXPECT_EQ(opened.size(), static_cast<size_t>(stored.record().personal_size()));
    audit::AuditEvent built = stored;
    audit::RestorePersonalValues(opened, *built.mutable_record());
    built.mutable_record()->clear_personal();
    built.set_schema_version(audit::kEmbeddedPersonalDataSchemaVersion);
    return built;
  }

  // The outbox row's envelope itself.
  audit::AuditEvent StoredEvent(const std::string& event_id) {
    pg::Statement st{"event",
                     "SELECT payload, event_type, mac, key_id FROM audit_outbox"
                     " WHERE event_id = $1::uuid"};
    auto r = conn_->Execute(st, {pg::Text(event_id)});
    EXPECT_TRUE(r.ok() && r->rows() == 1) << event_id;
    audit::AuditEvent e;
    if (r.ok() && r->rows() == 1) {
      EXPECT_TRUE(e.ParseFromString(r->GetBytes(0, 0)));
      EXPECT_EQ(r->GetString(0, 1), e.event_type());
      EXPECT_EQ(r->GetString(0, 3), signer_->key_id());
      EXPECT_EQ(outbox::RowMac(*signer_, r->GetBytes(0, 0)).value(), r->GetBytes(0, 2))
          << "outbox row " << event_id << " does not carry the MAC of the service's key";
    }
    return e;
  }

  // Injected between the outbox insert and COMMIT of every mutation.
  std::function<absl::Status(absl::string_view)> fault_ = [](absl::string_view) {
    return absl::OkStatus();
  };
  std::atomic<int64_t> wakes_{0};  // hooks.after_commit
  std::unique_ptr<server::BearerTokenResolver> resolver_;
  std::unique_ptr<server::Authorizer> authorizer_;
  const crypto::SigningKey* signer_ = nullptr;
  std::unique_ptr<pg::Connection> conn_;
  std::unique_ptr<pg::Pool> pool_;
  std::unique_ptr<Impl> service_;
  std::unique_ptr<metrics::Metrics> metrics_;
  std::unique_ptr<server::CallExecutor> calls_;  // outlives server_
  std::unique_ptr<server::GrpcServer> server_;
  std::unique_ptr<typename Service::Stub> stub_;
};

}  // namespace ulticode::testing
