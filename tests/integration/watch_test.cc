// AdminService/WatchAuditLogs over real gRPC against a real PostgreSQL:
// history then live rows in log order with no gap and no repeat, where a
// watch starts, filters that select what QueryAuditLogs selects, progress
// frames, the watcher limits, a caller that stops reading, shutdown, and a
// leaf without its audit row; each with and without the cache of the
// newest rows. Rows and leaves are inserted directly (the
// sequencer's contract is log_leaves: consecutive indexes, in one
// transaction per batch), so each test controls the log exactly.
#include <atomic>
#include <set>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "admin/migrations.h"
#include "admin/query/audit_query_service.h"
#include "admin/watch/watch_hub.h"
#include "common/ids/uuid.h"
#include "common/metrics/metrics.h"
#include "common/migrations/migrations.h"
#include "common/server/bearer_resolver.h"
#include "common/server/error_details.h"
#include "common/server/grpc_server.h"
#include "common/tlog/leaf.h"
#include "common/tlog/merkle.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "tests/support/audit_rows.h"
#include "tests/support/pg_query.h"
#include "tests/support/test_env.h"
#include "tests/support/tokens.h"

namespace ulticode::admin::watch {
namespace {

using query::AccessRules;
using query::AuditQueryService;

struct Frames {
  std::vector<uint64_t> indexes;
  std::vector<std::string> ids;
  std::vector<std::string> tokens;  // each row's resume token
  std::vector<v1::WatchProgress> progress;
};

// The first leaf a resume token goes on at: the position a frame stands at,
// which the API keeps opaque.
uint64_t NextLeafOf(const std::string& token) {
  absl::StatusOr<uint64_t> next = DecodeResumeToken(token);
  EXPECT_TRUE(next.ok()) << next.status();
  return next.value_or(UINT64_MAX);
}

// The ErrorInfo metadata "resumeToken" a watch's end carries ("" if none).
std::string ResumeTokenOf(const grpc::Status& status) {
  const server::ErrorDetails d = server::ErrorDetails::Of(status);
  if (!d.error_info) return "";
  const auto& metadata = d.error_info->metadata();
  const auto it = metadata.find("resumeToken");
  return it == metadata.end() ? "" : it->second;
}

// The ErrorInfo reason of a watch's end ("" if none).
std::string ReasonOf(const grpc::Status& status) {
  const server::ErrorDetails d = server::ErrorDetails::Of(status);
  return d.error_info ? d.error_info->reason() : "";
}

class WatchTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    pg::PoolOptions po;
    po.connect.conninfo = pg.ConnInfo(::ulticode::testing::CreateScratchDatabase(pg, "watch"));
    connect_ = po.connect;
    auto conn = pg::Connection::Connect(po.connect);
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = std::move(conn).value();
    ASSERT_TRUE(migrations::Apply(*conn_, Migrations()).ok());
    pool_ = std::make_unique<pg::Pool>(po);
    metrics_ = metrics::Metrics::Unexposed("test");
    options_.pg = connect_;
    options_.poll_interval = absl::Milliseconds(20);
    options_.progress_interval = absl::Milliseconds(300);
    options_.cache_rows = GetParam();
  }

  void TearDown() override { StopServing(); }

  void Serve() {
    hub_ = std::make_unique<WatchHub>(options_, metrics_->registry());
    hub_->Start();
    service_ = std::make_unique<AuditQueryService>(*pool_, authorizer_, *hub_, metrics_->registry(),
                                                   query::QueryServiceOptions{});
    server_ = std::make_unique<server::GrpcServer>(
        server::PlaintextOptions("127.0.0.1:0", 8, server::kAdminMaxReceiveBytes),
        metrics_->registry());
    server_->AddService(service_.get(), "ulticode.admin.v1.AdminService");
    ASSERT_TRUE(server_->Start().ok());
    stub_ = v1::AdminService::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server_->port()), grpc::InsecureChannelCredentials()));
  }

  // A client whose transport takes no more than a 64 KiB window ahead of
  // what it read (gRPC's default grows the window with the bandwidth-delay
  // estimate, so a client that stops reading could still absorb megabytes).
  std::unique_ptr<v1::AdminService::Stub> SlowReader() {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 * 1024);
    args.SetInt("grpc.channel_id", 1);  // a connection of its own
    return v1::AdminService::NewStub(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", server_->port()), grpc::InsecureChannelCredentials(), args));
  }

  void StopServing() {
    if (hub_) hub_->EndAll();
    if (server_) server_->Shutdown(absl::Seconds(2));
    if (hub_) hub_->Stop();
    server_.reset();
    service_.reset();
    hub_.reset();
  }

  void Exec(const std::string& sql, const pg::Params& params = {}) {
    pg::Statement st{"test.exec", sql.c_str()};
    auto r = conn_->Execute(st, params);
    ASSERT_TRUE(r.ok()) << r.status() << "\n" << sql;
  }

  // `n` audit rows, written as the inbox writes them, then sequenced by the
  // real sequencer (their leaves at the next indexes, in one transaction).
  // Returns their event ids in log order.
  std::vector<std::string> Append(int n, const std::string& actor = "alice",
                                  const std::string& action = "create_user",
                                  const std::string& owner = "auth", size_t value_bytes = 0) {
    std::vector<std::string> ids;
    std::vector<audit::AuditEvent> events;
    for (int i = 0; i < n; ++i) {
      audit::AuditEvent e = audit::NewEvent(audit::OwnerFromName(owner), owner + "." + action,
                                            {actor, "", "", "", ""}, absl::Now());
      auto* r = e.mutable_record();
      r->set_action(action);
      r->set_entity_type("user");
      r->set_entity_id(absl::StrCat("u", i));
      (*r->mutable_new_value()->mutable_fields())["pad"].set_string_value(
          std::string(value_bytes, 'x'));
      ids.push_back(e.event_id());
      events.push_back(std::move(e));
    }
    ::ulticode::testing::WriteAuditRows(*conn_, events);
    ::ulticode::testing::SequenceAll(*conn_);
    return ids;
  }

  static std::unique_ptr<grpc::ClientContext> Ctx(const std::string& who = "auditor",
                                                  absl::Duration deadline = absl::Seconds(30)) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->AddMetadata("authorization", ::ulticode::testing::SharedTestTokens().Bearer(who));
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    return ctx;
  }

  static v1::WatchAuditLogsRequest FromBeginning() {
    v1::WatchAuditLogsRequest req;
    req.mutable_beginning();
    return req;
  }

  static v1::WatchAuditLogsRequest Resume(const std::string& token) {
    v1::WatchAuditLogsRequest req;
    req.set_resume_token(token);
    return req;
  }

  // Reads frames until `done` says so (after each frame) or the stream
  // ends; the stream's status when it ended, OK otherwise.
  static grpc::Status ReadUntil(grpc::ClientReader<v1::WatchAuditLogsResponse>& reader,
                                Frames& frames, const std::function<bool(const Frames&)>& done) {
    v1::WatchAuditLogsResponse resp;
    while (reader.Read(&resp)) {
      if (resp.has_audit_log()) {
        EXPECT_TRUE(resp.audit_log().audit_log().has_log_index());
        EXPECT_FALSE(resp.audit_log().resume_token().empty());
        frames.indexes.push_back(resp.audit_log().audit_log().log_index());
        frames.ids.push_back(resp.audit_log().audit_log().event_id());
        frames.tokens.push_back(resp.audit_log().resume_token());
      } else {
        frames.progress.push_back(resp.progress());
      }
      if (done(frames)) return grpc::Status::OK;
    }
    return reader.Finish();
  }

  static bool Consecutive(const std::vector<uint64_t>& indexes, uint64_t first) {
    for (size_t i = 0; i < indexes.size(); ++i) {
      if (indexes[i] != first + i) return false;
    }
    return true;
  }

  pg::ConnectOptions connect_;
  std::unique_ptr<pg::Connection> conn_;
  std::unique_ptr<pg::Pool> pool_;
  std::unique_ptr<metrics::Metrics> metrics_;
  WatchOptions options_;
  const server::BearerTokenResolver resolver_{
      ::ulticode::testing::SharedTestTokens().jwks(),
      jwt::VerifyOptions{::ulticode::testing::kTestIssuer, ::ulticode::testing::kTestAudience}};
  const server::Authorizer authorizer_{resolver_, AccessRules()};
  std::unique_ptr<WatchHub> hub_;
  std::unique_ptr<AuditQueryService> service_;
  std::unique_ptr<server::GrpcServer> server_;
  std::unique_ptr<v1::AdminService::Stub> stub_;
};

TEST_P(WatchTest, HistoryThenLiveRowsInLogOrderWithNoGapAndNoRepeat) {
  Serve();
  const std::vector<std::string> history = Append(120);
  auto ctx = Ctx();
  auto reader = stub_->WatchAuditLogs(ctx.get(), FromBeginning());
  // Rows keep coming while the watch reads the history and after it.
  std::vector<std::string> live;
  size_t total = history.size();
  for (int batch = 0; batch < 12; ++batch) total += 1 + batch * 3;
  std::thread writer([&] {
    for (int batch = 0; batch < 12; ++batch) {
      for (const std::string& id : Append(1 + batch * 3)) live.push_back(id);
      absl::SleepFor(absl::Milliseconds(15));
    }
  });
  Frames frames;
  const grpc::Status s =
      ReadUntil(*reader, frames, [&](const Frames& f) { return f.ids.size() >= total; });
  writer.join();
  ASSERT_TRUE(s.ok()) << s.error_message();
  ctx->TryCancel();
  std::vector<std::string> all = history;
  all.insert(all.end(), live.begin(), live.end());
  EXPECT_EQ(frames.ids, all);
  EXPECT_TRUE(Consecutive(frames.indexes, 0));
}

TEST_P(WatchTest, StartsAfterAnIndexOrAtTheHead) {
  Serve();
  const std::vector<std::string> first = Append(50);
  // Resume tokens are opaque: "after index 19" is the token of that row's
  // frame, from a watch of the whole log.
  Frames whole;
  {
    auto wctx = Ctx();
    auto reader = stub_->WatchAuditLogs(wctx.get(), FromBeginning());
    ASSERT_TRUE(ReadUntil(*reader, whole, [](const Frames& f) { return f.ids.size() >= 20; }).ok());
    wctx->TryCancel();
  }
  ASSERT_EQ(whole.indexes[19], 19u);
  auto actx = Ctx();
  auto from20 = stub_->WatchAuditLogs(actx.get(), Resume(whole.tokens[19]));
  auto hctx = Ctx();
  auto head = stub_->WatchAuditLogs(hctx.get(), v1::WatchAuditLogsRequest());
  // The head watch has started once it sent its first progress frame.
  Frames at_head;
  ASSERT_TRUE(ReadUntil(*head, at_head, [](const Frames& f) { return !f.progress.empty(); }).ok());
  EXPECT_TRUE(at_head.ids.empty());
  EXPECT_EQ(at_head.progress[0].log_size(), 50u);
  // Its token stands after index 49: resuming with it (below) gets index 50 on.
  const std::string head_token = at_head.progress[0].resume_token();
  ASSERT_FALSE(head_token.empty());
  const std::vector<std::string> later = Append(5);
  ASSERT_TRUE(ReadUntil(*head, at_head, [](const Frames& f) { return f.ids.size() >= 5; }).ok());
  EXPECT_EQ(at_head.ids, later);
  EXPECT_TRUE(Consecutive(at_head.indexes, 50));
  auto rctx = Ctx();
  auto resumed = stub_->WatchAuditLogs(rctx.get(), Resume(head_token));
  Frames after_head;
  ASSERT_TRUE(
      ReadUntil(*resumed, after_head, [](const Frames& f) { return f.ids.size() >= 5; }).ok());
  EXPECT_EQ(after_head.ids, later);
  EXPECT_TRUE(Consecutive(after_head.indexes, 50));
  rctx->TryCancel();

  Frames frames;
  ASSERT_TRUE(ReadUntil(*from20, frames, [](const Frames& f) { return f.ids.size() >= 35; }).ok());
  EXPECT_TRUE(Consecutive(frames.indexes, 20));
  EXPECT_EQ(frames.ids.front(), first[20]);
  EXPECT_EQ(frames.ids.back(), later.back());
  actx->TryCancel();
  hctx->TryCancel();
}

TEST_P(WatchTest, ACursorBeyondTheLogIsRefusedNeverSkipped) {
  Serve();
  Append(5);
  // The token after index 3, as a watch of this log hands it out...
  Frames whole;
  {
    auto wctx = Ctx();
    auto reader = stub_->WatchAuditLogs(wctx.get(), FromBeginning());
    ASSERT_TRUE(ReadUntil(*reader, whole, [](const Frames& f) { return f.ids.size() >= 4; }).ok());
    wctx->TryCancel();
  }
  ASSERT_EQ(whole.indexes[3], 3u);
  // ...then the log loses leaves it had handed out, as a database restored
  // from an older backup would: its indexes are 0..2.
  Exec(
      "DELETE FROM audit_logs WHERE event_id IN (SELECT event_id FROM log_leaves"
      " WHERE log_index >= 3)");
  Exec("DELETE FROM log_leaves WHERE log_index >= 3");
  auto ctx = Ctx();
  auto reader = stub_->WatchAuditLogs(ctx.get(), Resume(whole.tokens[3]));
  Frames frames;
  const grpc::Status s = ReadUntil(*reader, frames, [](const Frames&) { return false; });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE) << s.error_message();
  EXPECT_NE(s.error_message().find("the log has 3 leaves"), std::string::npos) << s.error_message();
  EXPECT_TRUE(frames.ids.empty());

  // A token that is not one is refused by name (a start that is both the
  // beginning and a token cannot be sent: they are one oneof).
  auto bad = Ctx();
  auto refused = stub_->WatchAuditLogs(bad.get(), Resume("not-a-resume-token"));
  const grpc::Status b = ReadUntil(*refused, frames, [](const Frames&) { return false; });
  EXPECT_EQ(b.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(b.error_message().find("resume_token"), std::string::npos) << b.error_message();
  EXPECT_EQ(server::ErrorDetails::Of(b).BadField(), "resume_token") << b.error_message();
}

TEST_P(WatchTest, FiltersSelectWhatQueryAuditLogsSelectsInLogOrder) {
  Serve();
  // Half the rows before the watches start (history), half once they have
  // caught up (live: from the cache when there is one).
  auto add_round = [&] {
    Append(7, "alice", "create_user", "auth");
    Append(5, "bob", "assign_role", "auth");
    Append(6, "alice", "create_problem", "app");
  };
  add_round();
  add_round();
  struct Case {
    std::string name;
    std::function<void(v1::QueryAuditLogsRequest&)> query;
    std::function<void(v1::WatchAuditLogsRequest&)> watch;
  };
  const std::vector<Case> cases = {
      {"owner", [](auto& r) { r.mutable_filter()->set_owner(audit::v1::OWNER_APP); },
       [](auto& r) { r.mutable_filter()->set_owner(audit::v1::OWNER_APP); }},
      {"actor", [](auto& r) { r.mutable_filter()->set_actor("bob"); },
       [](auto& r) { r.mutable_filter()->set_actor("bob"); }},
      {"actor+action",
       [](auto& r) {
         r.mutable_filter()->set_actor("alice");
         r.mutable_filter()->set_action("create_user");
       },
       [](auto& r) {
         r.mutable_filter()->set_actor("alice");
         r.mutable_filter()->set_action("create_user");
       }},
      {"entity",
       [](auto& r) {
         r.mutable_filter()->set_entity_type("user");
         r.mutable_filter()->set_entity_id("u3");
       },
       [](auto& r) {
         r.mutable_filter()->set_entity_type("user");
         r.mutable_filter()->set_entity_id("u3");
       }},
      {"nothing", [](auto& r) { r.mutable_filter()->set_actor("nobody"); },
       [](auto& r) { r.mutable_filter()->set_actor("nobody"); }},
  };
  std::vector<std::unique_ptr<grpc::ClientContext>> ctxs;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::WatchAuditLogsResponse>>> readers;
  std::vector<Frames> frames(cases.size());
  // Every leaf up to `last` considered: the newest progress frame resumes
  // right after it.
  auto considered = [](uint64_t last) {
    return [last](const Frames& f) {
      return !f.progress.empty() && NextLeafOf(f.progress.back().resume_token()) == last + 1;
    };
  };
  for (const Case& c : cases) {
    v1::WatchAuditLogsRequest w = FromBeginning();
    c.watch(w);
    ctxs.push_back(Ctx());
    readers.push_back(stub_->WatchAuditLogs(ctxs.back().get(), w));
  }
  for (size_t k = 0; k < cases.size(); ++k) {
    ASSERT_TRUE(ReadUntil(*readers[k], frames[k], considered(35)).ok()) << cases[k].name;
  }
  add_round();
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(ReadUntil(*readers[k], frames[k], considered(53)).ok());
    ctxs[k]->TryCancel();
    v1::QueryAuditLogsRequest q;
    c.query(q);
    q.set_page_size(1000);
    v1::QueryAuditLogsResponse page;
    auto qctx = Ctx();
    ASSERT_TRUE(stub_->QueryAuditLogs(qctx.get(), q, &page).ok());
    std::vector<std::pair<uint64_t, std::string>> expected;
    for (const v1::AuditLog& log : page.audit_logs())
      expected.push_back({log.log_index(), log.event_id()});
    std::sort(expected.begin(), expected.end());
    std::vector<std::pair<uint64_t, std::string>> got;
    for (size_t i = 0; i < frames[k].ids.size(); ++i) {
      got.push_back({frames[k].indexes[i], frames[k].ids[i]});
    }
    EXPECT_EQ(got, expected);
  }
  // Filters are validated as QueryAuditLogs validates them.
  v1::WatchAuditLogsRequest bad = FromBeginning();
  bad.mutable_filter()->set_entity_id("u1");
  auto ctx = Ctx();
  auto reader = stub_->WatchAuditLogs(ctx.get(), bad);
  Frames none;
  const grpc::Status s = ReadUntil(*reader, none, [](const Frames&) { return false; });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "filter.entity_id: requires filter.entity_type");
  EXPECT_EQ(server::ErrorDetails::Of(s).BadField(), "filter.entity_id") << s.error_message();
}

TEST_P(WatchTest, ProgressFramesCarryTheLogSizeTheNewestCheckpointAndTheResumeToken) {
  Exec("INSERT INTO log_checkpoints (size, root, note) VALUES (4, sha256('r'), 'the note')");
  Serve();
  Append(4);
  v1::WatchAuditLogsRequest req = FromBeginning();
  req.mutable_filter()->set_actor("nobody");
  auto ctx = Ctx();
  auto reader = stub_->WatchAuditLogs(ctx.get(), req);
  Frames frames;
  const absl::Time t0 = absl::Now();
  ASSERT_TRUE(
      ReadUntil(*reader, frames, [](const Frames& f) { return f.progress.size() >= 3; }).ok());
  // One where the watch starts, then one after each quiet progress interval.
  EXPECT_GE(absl::Now() - t0, 2 * options_.progress_interval);
  const v1::WatchProgress p = frames.progress.back();
  EXPECT_EQ(p.log_size(), 4u);
  EXPECT_EQ(p.checkpoint().tree_size(), 4u);
  EXPECT_EQ(p.checkpoint().checkpoint(), "the note");
  EXPECT_TRUE(frames.ids.empty());
  ctx->TryCancel();
  // Its token resumes after every leaf the watch considered (0..3), though
  // it sent none of them: a watch resumed with it, without the filter,
  // gets index 4 first.
  ASSERT_FALSE(p.resume_token().empty());
  auto rctx = Ctx();
  auto resumed = stub_->WatchAuditLogs(rctx.get(), Resume(p.resume_token()));
  const std::vector<std::string> next = Append(1);
  Frames after;
  ASSERT_TRUE(ReadUntil(*resumed, after, [](const Frames& f) { return !f.ids.empty(); }).ok());
  EXPECT_EQ(after.indexes[0], 4u);
  EXPECT_EQ(after.ids[0], next[0]);
  rctx->TryCancel();
}

// A caught-up watch does not leave its rows waiting for the progress
// interval: a progress frame follows at once when the checkpoint last sent
// covers them, and when the log's checkpoint moves on after rows; and none
// more while nothing changes (the interval here is a minute).
TEST_P(WatchTest, AProgressFrameFollowsRowsAsSoonAsACheckpointCanProveThem) {
  options_.progress_interval = absl::Minutes(1);
  Exec("INSERT INTO log_checkpoints (size, root, note) VALUES (4, sha256('r'), 'note 4')");
  Serve();
  Append(4);
  auto ctx = Ctx("auditor", absl::Seconds(4));
  auto reader = stub_->WatchAuditLogs(ctx.get(), FromBeginning());
  Frames frames;
  std::vector<absl::Time> progress_at;
  bool grown = false;
  const grpc::Status ended = ReadUntil(*reader, frames, [&](const Frames& f) {
    if (progress_at.size() < f.progress.size()) progress_at.push_back(absl::Now());
    if (!grown && f.progress.size() == 2) {
      grown = true;
      Append(2);
      Exec("INSERT INTO log_checkpoints (size, root, note) VALUES (6, sha256('s'), 'note 6')");
    }
    return false;
  });
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << ended.error_message();
  ASSERT_EQ(frames.progress.size(), 3u) << "one at the start, one after each burst, no more";
  EXPECT_EQ(frames.indexes, (std::vector<uint64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(frames.progress[1].checkpoint().tree_size(), 4u);
  EXPECT_EQ(frames.progress[2].checkpoint().tree_size(), 6u);
  EXPECT_EQ(frames.progress[2].checkpoint().checkpoint(), "note 6");
  EXPECT_LT(progress_at[2] - progress_at[0], absl::Seconds(3));
}

TEST_P(WatchTest, EachRowCarriesItsLogEntry) {
  Serve();
  const std::vector<std::string> ids = Append(2, "alice", "create_user", "app");
  auto ctx = Ctx();
  auto reader = stub_->WatchAuditLogs(ctx.get(), FromBeginning());
  v1::WatchAuditLogsResponse resp;
  ASSERT_TRUE(reader->Read(&resp));
  ASSERT_TRUE(resp.has_progress());  // where the watch starts: before index 0
  const std::string start_token = resp.progress().resume_token();
  EXPECT_EQ(resp.progress().log_size(), 2u);
  ASSERT_TRUE(reader->Read(&resp));
  ASSERT_TRUE(resp.has_audit_log());
  const std::string stored = ::ulticode::testing::QueryText(
      *conn_, absl::StrCat("SELECT encode(hash, 'hex') FROM log_nodes WHERE level = 0 AND idx = ",
                           resp.audit_log().audit_log().log_index()));
  const tlog::Hash hash = tlog::LeafHash(resp.audit_log().leaf());
  EXPECT_EQ(absl::BytesToHexString(
                absl::string_view(reinterpret_cast<const char*>(hash.data()), hash.size())),
            stored);
  auto leaf = tlog::DecodeLeaf(resp.audit_log().leaf());
  ASSERT_TRUE(leaf.ok()) << leaf.status();
  EXPECT_EQ(leaf->owner, "app");
  EXPECT_EQ(leaf->event_id, ids[0]);
  EXPECT_EQ(resp.audit_log().audit_log().actor(), "alice");
  ctx->TryCancel();
  // The first progress frame's token stands before index 0: resuming with
  // it starts at the first row.
  ASSERT_FALSE(start_token.empty());
  auto rctx = Ctx();
  auto resumed = stub_->WatchAuditLogs(rctx.get(), Resume(start_token));
  Frames again;
  ASSERT_TRUE(ReadUntil(*resumed, again, [](const Frames& f) { return !f.ids.empty(); }).ok());
  EXPECT_EQ(again.indexes[0], 0u);
  EXPECT_EQ(again.ids[0], ids[0]);
  rctx->TryCancel();
}

TEST_P(WatchTest, LimitsPerPrincipalAndInAllRefuseWithResourceExhausted) {
  options_.max_per_principal = 2;
  options_.max_watchers = 3;
  Serve();
  Append(1);
  std::vector<std::unique_ptr<grpc::ClientContext>> ctxs;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::WatchAuditLogsResponse>>> readers;
  auto open = [&](const std::string& who) -> grpc::Status {
    ctxs.push_back(Ctx(who));
    readers.push_back(stub_->WatchAuditLogs(ctxs.back().get(), FromBeginning()));
    Frames frames;
    return ReadUntil(*readers.back(), frames, [](const Frames& f) { return !f.ids.empty(); });
  };
  ASSERT_TRUE(open("auditor").ok());
  ASSERT_TRUE(open("auditor").ok());
  grpc::Status third = open("auditor");
  EXPECT_EQ(third.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(third.error_message().find("--watch-max-per-principal"), std::string::npos);
  ASSERT_TRUE(open("auditor2").ok());
  grpc::Status fourth = open("auditor3");
  EXPECT_EQ(fourth.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(fourth.error_message().find("--watch-max-watchers"), std::string::npos);
  // A watch that ends gives its place back.
  ctxs[0]->TryCancel();
  grpc::Status again;
  for (absl::Time end = absl::Now() + absl::Seconds(10); absl::Now() < end;) {
    again = open("auditor");
    if (again.ok()) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(again.ok()) << again.error_message();
  for (auto& c : ctxs) c->TryCancel();
}

TEST_P(WatchTest, ACallerWhoStopsReadingIsEndedWithTheTokenToResumeWith) {
  options_.stall_timeout = absl::Seconds(2);
  Serve();
  // 32 MB, far more than a reader's window and the sockets buffer: the
  // server's writes block.
  for (int i = 0; i < 8; ++i) Append(250, "alice", "create_user", "auth", 16 * 1024);
  auto ctx = Ctx("auditor", absl::Seconds(60));
  auto reader = SlowReader()->WatchAuditLogs(ctx.get(), FromBeginning());
  Frames frames;
  ASSERT_TRUE(ReadUntil(*reader, frames, [](const Frames& f) { return !f.ids.empty(); }).ok());
  // Reads nothing for 1.5 stall timeouts: ended after one, its status
  // behind the rows already sent (cancelled only after two).
  absl::SleepFor(absl::Seconds(3));
  const grpc::Status s = ReadUntil(*reader, frames, [](const Frames&) { return false; });
  ASSERT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  ASSERT_LT(frames.ids.size(), 2000u);
  EXPECT_TRUE(Consecutive(frames.indexes, 0));
  // The end carries where to resume (ErrorInfo) and that a retry can
  // succeed (RetryInfo).
  EXPECT_EQ(ReasonOf(s), "WATCH_STALLED") << s.error_message();
  EXPECT_TRUE(server::ErrorDetails::Of(s).retry_info.has_value()) << s.error_message();
  const std::string token = ResumeTokenOf(s);
  ASSERT_FALSE(token.empty()) << s.error_message();

  // Resuming with it gets the row after the last one received.
  auto rctx = Ctx();
  auto next = stub_->WatchAuditLogs(rctx.get(), Resume(token));
  Frames more;
  ASSERT_TRUE(ReadUntil(*next, more, [](const Frames& f) { return !f.ids.empty(); }).ok());
  EXPECT_EQ(more.indexes[0], frames.indexes.back() + 1) << "last row " << frames.indexes.back();
  rctx->TryCancel();
}

TEST_P(WatchTest, ACallerWhoNeverReadsAgainIsCancelledAndItsPlaceFreed) {
  options_.stall_timeout = absl::Seconds(1);
  options_.max_per_principal = 1;
  Serve();
  for (int i = 0; i < 8; ++i) Append(250, "alice", "create_user", "auth", 16 * 1024);
  auto ctx = Ctx("auditor", absl::Seconds(60));
  auto slow = SlowReader();
  auto stuck = slow->WatchAuditLogs(ctx.get(), FromBeginning());
  Frames frames;
  ASSERT_TRUE(ReadUntil(*stuck, frames, [](const Frames& f) { return !f.ids.empty(); }).ok());
  // The same principal may watch again once the stuck stream is cancelled.
  grpc::Status again = grpc::Status(grpc::StatusCode::UNKNOWN, "not tried");
  std::unique_ptr<grpc::ClientContext> actx;
  std::unique_ptr<grpc::ClientReader<v1::WatchAuditLogsResponse>> next;
  for (absl::Time end = absl::Now() + absl::Seconds(20); absl::Now() < end;) {
    actx = Ctx();
    next = stub_->WatchAuditLogs(actx.get(), FromBeginning());
    Frames first;
    again = ReadUntil(*next, first, [](const Frames& f) { return !f.ids.empty(); });
    if (again.ok()) break;
    EXPECT_EQ(again.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << again.error_message();
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_TRUE(again.ok()) << again.error_message();
  actx->TryCancel();
  ctx->TryCancel();
}

TEST_P(WatchTest, ARowThatCannotBeReadEndsTheWatchNamingWhereToResume) {
  Serve();
  const std::vector<std::string> ids = Append(6);
  // A column that is not what the owner signed: the row is never served.
  Exec("UPDATE audit_logs SET new_value = '[1, 2]' WHERE event_id = $1::uuid", {pg::Text(ids[4])});
  auto ctx = Ctx();
  auto reader = stub_->WatchAuditLogs(ctx.get(), FromBeginning());
  Frames frames;
  const grpc::Status s = ReadUntil(*reader, frames, [](const Frames&) { return false; });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DATA_LOSS) << s.error_message();
  EXPECT_NE(s.error_message().find(ids[4]), std::string::npos) << s.error_message();
  EXPECT_EQ(ReasonOf(s), "WATCH_DATA_LOSS") << s.error_message();
  EXPECT_FALSE(ResumeTokenOf(s).empty()) << s.error_message();
}

TEST_P(WatchTest, ShutdownEndsWatchesWithUnavailableAndTheResumeToken) {
  Serve();
  Append(10);
  auto ctx = Ctx();
  auto reader = stub_->WatchAuditLogs(ctx.get(), FromBeginning());
  Frames frames;
  ASSERT_TRUE(ReadUntil(*reader, frames, [](const Frames& f) { return f.ids.size() >= 10; }).ok());
  hub_->EndAll();
  const grpc::Status s = ReadUntil(*reader, frames, [](const Frames&) { return false; });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ReasonOf(s), "WATCH_SHUTDOWN") << s.error_message();
  EXPECT_TRUE(server::ErrorDetails::Of(s).retry_info.has_value()) << s.error_message();
  const std::string token = ResumeTokenOf(s);
  ASSERT_FALSE(token.empty()) << s.error_message();
  // New watches are refused while shutting down.
  auto late = Ctx();
  auto refused = stub_->WatchAuditLogs(late.get(), FromBeginning());
  EXPECT_EQ(ReadUntil(*refused, frames, [](const Frames&) { return false; }).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // The token stands after index 9: watching again with it, on a new
  // server, gets index 10 on and nothing before.
  StopServing();
  Serve();
  auto rctx = Ctx();
  auto resumed = stub_->WatchAuditLogs(rctx.get(), Resume(token));
  const std::vector<std::string> later = Append(2);
  Frames after;
  ASSERT_TRUE(ReadUntil(*resumed, after, [](const Frames& f) { return f.ids.size() >= 2; }).ok());
  EXPECT_EQ(after.ids, later);
  EXPECT_TRUE(Consecutive(after.indexes, 10));
  rctx->TryCancel();
}

TEST_P(WatchTest, ALeafWithoutItsAuditRowEndsTheWatchWithDataLoss) {
  Serve();
  const std::vector<std::string> ids = Append(5);
  Exec("DELETE FROM audit_logs WHERE event_id = $1::uuid", {pg::Text(ids[3])});
  v1::WatchAuditLogsRequest req = FromBeginning();
  req.mutable_filter()->set_actor("alice");
  auto ctx = Ctx();
  auto reader = stub_->WatchAuditLogs(ctx.get(), req);
  Frames frames;
  const grpc::Status s = ReadUntil(*reader, frames, [](const Frames&) { return false; });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DATA_LOSS) << s.error_message();
  EXPECT_NE(s.error_message().find("log leaf 3"), std::string::npos) << s.error_message();
  EXPECT_TRUE(frames.ids.empty());  // fetched with the bad leaf: none sent
}

TEST_P(WatchTest, OnlyAuditReadersMayWatch) {
  Serve();
  grpc::ClientContext anonymous;
  auto a = stub_->WatchAuditLogs(&anonymous, FromBeginning());
  Frames frames;
  EXPECT_EQ(ReadUntil(*a, frames, [](const Frames&) { return false; }).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  ::ulticode::testing::TokenSpec spec;
  spec.subject = "writer";
  spec.roles = {"auth.admin"};
  grpc::ClientContext writer;
  writer.AddMetadata("authorization",
                     "Bearer " + ::ulticode::testing::SharedTestTokens().Mint(spec));
  auto w = stub_->WatchAuditLogs(&writer, FromBeginning());
  EXPECT_EQ(ReadUntil(*w, frames, [](const Frames&) { return false; }).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

// Every test twice: watches served by PostgreSQL alone, and by the cache of
// the newest rows once they are caught up.
INSTANTIATE_TEST_SUITE_P(DatabaseOrCache, WatchTest, ::testing::Values(0, 4096),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return p.param == 0 ? std::string("Database") : std::string("Cache");
                         });

}  // namespace
}  // namespace ulticode::admin::watch
