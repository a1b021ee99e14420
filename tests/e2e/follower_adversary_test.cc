// A verifying follower (client::Follower, what ulticode-forward and
// ulticode-tail --verify run) behind a lying Admin: a proxy in front of a
// real mesh that passes every call through but tells one seeded lie in its
// WatchAuditLogs stream: a leaf skipped at a start or in the middle,
// repeated, moved back. With and without a filter, and across a restart
// from a saved position, every lie is a break (DATA_LOSS naming the leaf
// that came where another must) and no row after the lie is handed over;
// without a lie, a restart goes on at exactly the saved log index. A
// position file whose checkpoint the log did not sign, or whose index lies
// beyond its checkpoint, does not start.
//
// The seed is printed; ULTICODE_FOLLOWER_ADVERSARY_SEED=N reproduces a run.
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/crypto/crypto.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/support/mesh.h"
#include "tests/support/mesh_calls.h"
#include "tests/support/test_env.h"
#include "tests/support/tokens.h"
#include "tools/client/follower.h"
#include "tools/client/position_file.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"
#include "ulticode/admin/v1/audit_log.grpc.pb.h"

namespace ulticode {
namespace {

namespace v1 = admin::v1;
using ::ulticode::testing::Mesh;
using ::ulticode::testing::Service;

constexpr int kRows = 24;  // business changes, half on each owner

enum class Lie { kNone, kSkipFirst, kSkipOne, kRepeat, kMoveBack };

const char* Name(Lie lie) {
  switch (lie) {
    case Lie::kNone:
      return "none";
    case Lie::kSkipFirst:
      return "skip-first";
    case Lie::kSkipOne:
      return "skip-one";
    case Lie::kRepeat:
      return "repeat";
    case Lie::kMoveBack:
      return "move-back";
  }
  return "?";
}

std::unique_ptr<grpc::ClientContext> Upstream(const grpc::ServerContext& in) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  for (const auto& [key, value] : in.client_metadata()) {
    if (key == "authorization")
      ctx->AddMetadata("authorization", std::string(value.data(), value.size()));
  }
  return ctx;
}

// The proofs and checkpoints a follower asks for, passed through as they are.
class HonestLog final : public v1::AuditLogService::Service {
 public:
  explicit HonestLog(std::shared_ptr<grpc::Channel> admin)
      : stub_(v1::AuditLogService::NewStub(std::move(admin))) {}

  grpc::Status GetCheckpoint(grpc::ServerContext* ctx, const v1::GetCheckpointRequest* req,
                             v1::SignedCheckpoint* out) override {
    return stub_->GetCheckpoint(Upstream(*ctx).get(), *req, out);
  }
  grpc::Status GetInclusionProof(grpc::ServerContext* ctx, const v1::GetInclusionProofRequest* req,
                                 v1::InclusionProof* out) override {
    return stub_->GetInclusionProof(Upstream(*ctx).get(), *req, out);
  }
  grpc::Status GetConsistencyProof(grpc::ServerContext* ctx,
                                   const v1::GetConsistencyProofRequest* req,
                                   v1::ConsistencyProof* out) override {
    return stub_->GetConsistencyProof(Upstream(*ctx).get(), *req, out);
  }

 private:
  std::unique_ptr<v1::AuditLogService::Stub> stub_;
};

// WatchAuditLogs passed through with one lie: at row frame `at` of a
// stream (of a resumed stream only, for kSkipFirst: its first rows).
class LyingWatch final : public v1::AdminService::Service {
 public:
  explicit LyingWatch(std::shared_ptr<grpc::Channel> admin)
      : stub_(v1::AdminService::NewStub(std::move(admin))) {}

  void Tell(Lie lie, int at) {
    std::lock_guard<std::mutex> lock(mu_);
    lie_ = lie;
    at_ = at;
    told_ = false;
  }
  bool told() {
    std::lock_guard<std::mutex> lock(mu_);
    return told_;
  }

  grpc::Status WatchAuditLogs(grpc::ServerContext* ctx, const v1::WatchAuditLogsRequest* req,
                              grpc::ServerWriter<v1::WatchAuditLogsResponse>* out) override {
    auto up = Upstream(*ctx);
    auto reader = stub_->WatchAuditLogs(up.get(), *req);
    v1::WatchAuditLogsResponse frame;
    std::vector<v1::WatchAuditLogsResponse> sent;  // this stream's row frames
    int skipped = 0;
    bool ok = true;
    while (ok && !ctx->IsCancelled() && reader->Read(&frame)) {
      if (!frame.has_audit_log()) {
        ok = out->Write(frame);
        continue;
      }
      switch (Due(req->has_resume_token(), static_cast<int>(sent.size()), &skipped)) {
        case Lie::kSkipFirst:
        case Lie::kSkipOne:
          continue;
        case Lie::kRepeat:
          ok = out->Write(sent.back());
          break;
        case Lie::kMoveBack:
          ok = out->Write(sent[sent.size() - 2]);
          break;
        case Lie::kNone:
          break;
      }
      ok = ok && out->Write(frame);
      sent.push_back(frame);
    }
    up->TryCancel();
    (void)reader->Finish();
    return grpc::Status::OK;
  }

 private:
  // The lie due at row frame `row` of a stream (kNone when none is).
  Lie Due(bool resumed, int row, int* skipped) {
    std::lock_guard<std::mutex> lock(mu_);
    if (lie_ == Lie::kSkipFirst) {
      if (!resumed || *skipped >= at_ || (told_ && *skipped == 0)) return Lie::kNone;
      ++*skipped;
      told_ = true;
      return lie_;
    }
    if (told_ || lie_ == Lie::kNone || row != at_) return Lie::kNone;
    told_ = true;
    return lie_;
  }

  std::unique_ptr<v1::AdminService::Stub> stub_;
  std::mutex mu_;
  Lie lie_ = Lie::kNone;
  int at_ = 0;
  bool told_ = false;
};

class FollowerAdversaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    ULTI_REQUIRE_REDIS(redis);
    testing::MeshOptions options;
    options.prefix = "follower_adv";
    options.admin_args = {"--log-checkpoint-interval=100ms", "--log-sequence-interval=50ms",
                          "--watch-poll-interval=20ms"};
    mesh_ = std::make_unique<Mesh>(pg, redis, options);
    std::string error;
    for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
      ASSERT_TRUE(mesh_->Start(s, 0, &error)) << error;
    }
    dir_ = mesh_->keys().dir();
    testing::TokenSpec spec;
    spec.subject = "follower";
    spec.roles = {"audit.reader"};
    ASSERT_TRUE(
        crypto::WriteSecretFile(dir_ + "/reader.token", testing::SharedTestTokens().Mint(spec))
            .ok());
    for (int i = 0; i < kRows; ++i) {
      auto made = i % 2 == 0 ? testing::CreateUser(*mesh_, absl::StrCat("adv", i))
                             : testing::CreateProblem(*mesh_, 5000 + i);
      ASSERT_TRUE(made.ok()) << made.status();
    }
    auto admin = mesh_->Channel(Service::kAdmin, 0);
    log_ = std::make_unique<HonestLog>(admin);
    watch_ = std::make_unique<LyingWatch>(admin);
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(log_.get());
    b.RegisterService(watch_.get());
    proxy_ = b.BuildAndStart();
    ASSERT_NE(proxy_, nullptr);
    auto v = client::VerificationFromFiles(mesh_->keys().LogVerifierKeyFile(),
                                           mesh_->keys().WitnessKeysFile(), 0,
                                           mesh_->keys().public_keys_file());
    ASSERT_TRUE(v.ok()) << v.status();
    verification_ = *v;
    WaitForTheLog();
  }

  void TearDown() override {
    if (proxy_) proxy_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  // The log holds kRows leaves, all in a checkpoint the witnesses cosigned.
  void WaitForTheLog() {
    auto stub = v1::AuditLogService::NewStub(mesh_->Channel(Service::kAdmin, 0));
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          grpc::ClientContext ctx;
          testing::Authorize(&ctx, "follower", {"audit.reader"});
          v1::GetCheckpointRequest req;
          req.mutable_newest_witnessed();
          v1::SignedCheckpoint c;
          return stub->GetCheckpoint(&ctx, req, &c).ok() && c.tree_size() == kRows;
        },
        std::chrono::seconds(60)));
  }

  struct Run {
    absl::Status status;
    std::vector<uint64_t> rows;  // log indexes handed over, in order
    std::optional<client::Position> last;
  };

  // A verifying follower through the proxy, from `start` (else the
  // beginning), until `max_rows` rows, every leaf, a break, or 30 s.
  Run Follow(const v1::AuditLogFilter& filter, std::optional<client::Position> start,
             size_t max_rows) {
    client::FollowOptions o;
    o.admin = absl::StrCat("127.0.0.1:", port_);
    o.token_file = dir_ + "/reader.token";
    o.filter = filter;
    o.start = std::move(start);
    o.from_beginning = true;
    o.idle_timeout = absl::Seconds(5);
    o.verification = verification_;
    Run run;
    client::FollowHandlers h;
    h.row = [&](const v1::WatchedAuditLog& row, const client::Position&) -> absl::StatusOr<bool> {
      run.rows.push_back(row.audit_log().log_index());
      return run.rows.size() < max_rows && row.audit_log().log_index() + 1 < kRows;
    };
    std::unique_ptr<client::Follower> follower;
    h.passed = [&](const client::Position& p) {
      // Through the file's text, as a restart reads it.
      auto parsed = client::ParsePosition(client::PositionText(p));
      EXPECT_TRUE(parsed.ok()) << parsed.status();
      if (parsed.ok()) run.last = *parsed;
      if (p.next_index >= kRows) follower->Stop();  // every leaf considered
    };
    follower = std::make_unique<client::Follower>(o, h);
    std::atomic<bool> over{false};
    std::thread timer([&] {
      for (int i = 0; i < 300 && !over; ++i) absl::SleepFor(absl::Milliseconds(100));
      follower->Stop();
    });
    const absl::Time began = absl::Now();
    run.status = follower->Run();
    over = true;
    timer.join();
    std::printf("[follower adversary] %zu rows in %s: %s\n", run.rows.size(),
                absl::FormatDuration(absl::Now() - began).c_str(), run.status.ToString().c_str());
    return run;
  }

  std::unique_ptr<Mesh> mesh_;
  std::string dir_;
  std::unique_ptr<HonestLog> log_;
  std::unique_ptr<LyingWatch> watch_;
  std::unique_ptr<grpc::Server> proxy_;
  int port_ = 0;
  client::Verification verification_;
};

v1::AuditLogFilter AuthOnly() {
  v1::AuditLogFilter f;
  f.set_owner(audit::v1::OWNER_AUTH);
  return f;
}

// Rows handed over walk the log leaf by leaf (unfiltered) or are its
// auth rows in order (filtered): what was handed is never a lie's.
void ExpectInOrder(const std::vector<uint64_t>& rows, bool filtered, uint64_t first) {
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!filtered) {
      EXPECT_EQ(rows[i], first + i) << "row " << i;
    } else if (i > 0) {
      EXPECT_GT(rows[i], rows[i - 1]) << "row " << i;
    }
  }
}

TEST_F(FollowerAdversaryTest, EveryLieOfTheStreamIsABreakAtStartAndOnTheWay) {
  std::mt19937 rng(testing::SeedFromEnv("ULTICODE_FOLLOWER_ADVERSARY_SEED", "follower adversary"));
  for (const bool filtered : {false, true}) {
    const v1::AuditLogFilter filter = filtered ? AuthOnly() : v1::AuditLogFilter();
    // A first run stops after a few rows: its position is where the next starts.
    watch_->Tell(Lie::kNone, 0);
    const size_t first_rows = 2 + rng() % 4;
    Run first = Follow(filter, std::nullopt, first_rows);
    ASSERT_TRUE(first.status.ok()) << first.status;
    ASSERT_EQ(first.rows.size(), first_rows);
    ASSERT_TRUE(first.last && first.last->verified() && first.last->checkpoint);
    ExpectInOrder(first.rows, filtered, 0);
    const uint64_t next = *first.last->next_index;
    EXPECT_EQ(next, first.rows.back() + 1);

    for (Lie lie : {Lie::kNone, Lie::kSkipFirst, Lie::kSkipOne, Lie::kRepeat, Lie::kMoveBack}) {
      const int at = lie == Lie::kSkipFirst ? 1 + static_cast<int>(rng() % 3)
                                            : 2 + static_cast<int>(rng() % 6);
      SCOPED_TRACE(
          absl::StrCat(filtered ? "filtered" : "unfiltered", ", lie ", Name(lie), " at ", at));
      watch_->Tell(lie, at);
      Run run = Follow(filter, first.last, kRows);
      ExpectInOrder(run.rows, filtered, next);
      if (!run.rows.empty() && !filtered) EXPECT_EQ(run.rows.front(), next);
      if (lie == Lie::kNone) {
        EXPECT_TRUE(run.status.ok()) << run.status;
        EXPECT_FALSE(run.rows.empty());
        continue;
      }
      ASSERT_TRUE(watch_->told()) << "the proxy never lied";
      EXPECT_TRUE(absl::IsDataLoss(run.status)) << run.status;
      EXPECT_TRUE(absl::StrContains(run.status.message(), "came where log index")) << run.status;
      // Nothing the lie moved was handed: every row before it was, and the
      // position stayed before it.
      const uint64_t lied_at = next + (lie == Lie::kSkipFirst ? 0 : static_cast<uint64_t>(at));
      for (uint64_t index : run.rows) EXPECT_LT(index, lied_at);
      if (run.last) EXPECT_LE(*run.last->next_index, lied_at);
    }
  }
}

TEST_F(FollowerAdversaryTest, APositionThatTheLogDidNotProveDoesNotStart) {
  watch_->Tell(Lie::kNone, 0);
  Run first = Follow(v1::AuditLogFilter(), std::nullopt, 3);
  ASSERT_TRUE(first.status.ok()) << first.status;
  ASSERT_TRUE(first.last && first.last->checkpoint);

  // A checkpoint whose note the log did not sign (one byte of its body changed).
  client::Position forged = *first.last;
  std::string& note = *forged.checkpoint->mutable_checkpoint();
  note[note.find('\n') + 1] ^= 1;
  Run run = Follow(v1::AuditLogFilter(), forged, kRows);
  EXPECT_TRUE(absl::IsInvalidArgument(run.status)) << run.status;
  EXPECT_TRUE(absl::StrContains(run.status.message(), "does not meet the policy")) << run.status;
  EXPECT_TRUE(run.rows.empty());

  // An index beyond its checkpoint, or a token alone, is refused as it is read.
  client::Position beyond = *first.last;
  beyond.next_index = beyond.checkpoint->tree_size() + 1;
  auto parsed = client::ParsePosition(client::PositionText(beyond));
  EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << parsed.status();
  EXPECT_TRUE(absl::StrContains(parsed.status().message(), "beyond its checkpoint"));
  Run bare = Follow(v1::AuditLogFilter(), client::Position{first.last->token, {}, {}}, kRows);
  EXPECT_TRUE(absl::IsInvalidArgument(bare.status)) << bare.status;
  EXPECT_TRUE(bare.rows.empty());
}

}  // namespace
}  // namespace ulticode
