// Operator actions end to end, on the three real server binaries:
//  - the "Admin's database is lost" procedure (docs/guarantees.md): Admin's
//    tables wiped, then Replay on both owners brings every audit row back,
//    exactly once, each replay itself in audit_logs with the operator as the
//    actor;
//  - the owners' RedriveDeadOutbox;
//  - Admin's ListDeadInbox / RequeueDeadInbox and ListPoison / ReplayPoison /
//    DiscardPoison, each change with Admin's own signed audit record;
//  - and their refusals (nothing changed).
#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/pg/connection.h"
#include "common/server/error_details.h"
#include "gtest/gtest.h"
#include "tests/support/audit_events.h"
#include "tests/support/keys.h"
#include "tests/support/mesh.h"
#include "tests/support/mesh_calls.h"
#include "tests/support/pg_query.h"
#include "tests/support/tokens.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"
#include "ulticode/outbox/v1/outbox.grpc.pb.h"

namespace ulticode {
namespace {

using ::ulticode::testing::Mesh;
using ::ulticode::testing::QueryInt;
using ::ulticode::testing::Service;
using ::ulticode::testing::WaitFor;
namespace opsv1 = ::ulticode::outbox::v1;
namespace adminv1 = ::ulticode::admin::v1;

// XADD to one stream as the test's Redis user (a producer with access).
class RedisClientForTest {
 public:
  explicit RedisClientForTest(std::string stream) : stream_(std::move(stream)) {
    auto endpoint = testing::RedisFromEnv();
    redis::Options o;
    o.host = endpoint->host;
    o.port = endpoint->port;
    o.user = endpoint->user;
    o.password = endpoint->password;
    client_ = std::make_unique<redis::Client>(o);
  }
  void Add(const redis::StreamFields& fields) {
    auto ids = client_->XAddBatch(stream_, {fields});
    EXPECT_TRUE(ids.ok()) << ids.status();
  }

 private:
  std::string stream_;
  std::unique_ptr<redis::Client> client_;
};

class OperationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    ULTI_REQUIRE_REDIS(redis);
    testing::MeshOptions options;
    options.prefix = "ops";
    mesh_ = std::make_unique<Mesh>(pg, redis, options);
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
  }

  pg::Connection& Db(Service s) { return *db_[static_cast<int>(s)]; }
  int64_t Admin(const std::string& sql) { return QueryInt(Db(Service::kAdmin), sql); }

  static void As(grpc::ClientContext* ctx, const std::string& principal,
                 const std::vector<std::string>& roles) {
    testing::Authorize(ctx, principal, roles);
  }

  // Business changes on both owners; returns their event ids.
  std::vector<std::string> Mutate(int n) {
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i) {
      for (auto id : {testing::CreateUser(*mesh_, absl::StrCat("user", i)),
                      testing::CreateProblem(*mesh_, i)}) {
        EXPECT_TRUE(id.ok()) << id.status();
        ids.push_back(id.value_or(""));
      }
    }
    return ids;
  }

  bool AllConfirmed() {
    return QueryInt(Db(Service::kAuth),
                    "SELECT count(*) FROM audit_outbox WHERE state <> 'CONFIRMED'") == 0 &&
           QueryInt(Db(Service::kApp),
                    "SELECT count(*) FROM audit_outbox WHERE state <> 'CONFIRMED'") == 0;
  }

  std::unique_ptr<Mesh> mesh_;
  std::unique_ptr<pg::Connection> db_[3];
};

TEST_F(OperationsTest, ReplayFromBothOwnersRebuildsAWipedAdminDatabaseExactlyOnce) {
  const std::vector<std::string> ids = Mutate(10);
  ASSERT_TRUE(
      WaitFor([&] { return Admin("SELECT count(*) FROM audit_logs") == 20 && AllConfirmed(); },
              std::chrono::seconds(30)));

  // Admin's database is lost: an empty one takes its place.
  ASSERT_TRUE(Db(Service::kAdmin)
                  .Execute(pg::Statement{"wipe",
                                         "TRUNCATE audit_logs, consumer_inbox, poison_events,"
                                         " log_leaves, log_queue, log_nodes, log_checkpoints,"
                                         " log_cosignatures, log_witnesses, log_proof_requests,"
                                         " personal_values, personal_erasures"},
                           {})
                  .ok());
  ASSERT_EQ(Admin("SELECT count(*) FROM audit_logs"), 0);
  // The new database is a new log: the procedure (docs/guarantees.md) has
  // each owner forget the old one's checkpoint, or it refuses the new log.
  for (Service s : {Service::kAuth, Service::kApp}) {
    ASSERT_TRUE(Db(s).Execute(pg::Statement{"forget", "DELETE FROM log_witnessed"}, {}).ok());
  }

  google::protobuf::Timestamp from, to;
  from.set_seconds(absl::ToUnixSeconds(absl::Now() - absl::Hours(1)));
  to.set_seconds(absl::ToUnixSeconds(absl::Now() + absl::Minutes(1)));
  std::vector<std::string> replay_events;
  for (Service s : {Service::kAuth, Service::kApp}) {
    auto ops = opsv1::OutboxOperations::NewStub(mesh_->Channel(s, 0));
    opsv1::ReplayRequest req;
    *req.mutable_start_time() = from;
    *req.mutable_end_time() = to;
    req.set_reason("Admin database restored from an empty backup");
    req.set_request_id(::ulticode::testing::RequestIdFor("rebuild-1"));
    {
      grpc::ClientContext ctx;
      As(&ctx, "olivia", {"audit.reader"});
      opsv1::ReplayResponse resp;
      EXPECT_EQ(ops->Replay(&ctx, req, &resp).error_code(), grpc::StatusCode::PERMISSION_DENIED)
          << "audit.operator is required";
    }
    grpc::ClientContext ctx;
    As(&ctx, "olivia", {"audit.operator"});
    opsv1::ReplayResponse resp;
    grpc::Status st = ops->Replay(&ctx, req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.replayed(), 10);
    EXPECT_TRUE(resp.changed());
    replay_events.push_back(resp.event_id());
  }
  // Every original event is back, once, with the operator's two records.
  ASSERT_TRUE(WaitFor([&] { return Admin("SELECT count(*) FROM audit_logs") == 22; },
                      std::chrono::seconds(30)))
      << Admin("SELECT count(*) FROM audit_logs");
  for (const std::string& id : ids) {
    EXPECT_EQ(Admin("SELECT count(*) FROM audit_logs WHERE event_id = '" + id + "'"), 1) << id;
  }
  for (const std::string& id : replay_events) {
    EXPECT_EQ(Admin("SELECT count(*) FROM audit_logs WHERE event_id = '" + id +
                    "' AND actor = 'olivia' AND action = 'replay_outbox' AND entity_type ="
                    " 'audit_outbox' AND new_value->>'replayed' = '10'"),
              1)
        << id;
  }
  EXPECT_TRUE(WaitFor([&] { return AllConfirmed(); }, std::chrono::seconds(30)))
      << "the replayed rows are proved again";
}

TEST_F(OperationsTest, RedriveDeadOutboxPublishesDeadRowsAgainAndRefusesBadRequests) {
  const std::vector<std::string> ids = Mutate(2);
  ASSERT_TRUE(
      WaitFor([&] { return Admin("SELECT count(*) FROM audit_logs") == 4 && AllConfirmed(); },
              std::chrono::seconds(30)));
  // An event that went DEAD (say Redis refused it for good) and whose cause
  // was fixed; its audit row is gone too (Admin lost it).
  const std::string dead = ids[0];
  ASSERT_TRUE(Db(Service::kAuth)
                  .Execute(pg::Statement{"kill", ("UPDATE audit_outbox SET state = 'DEAD', "
                                                  "last_error = 'refused' WHERE event_id = '" +
                                                  dead + "'")
                                                     .c_str()},
                           {})
                  .ok());
  ASSERT_TRUE(
      Db(Service::kAdmin)
          .Execute(
              pg::Statement{"lose",
                            ("DELETE FROM audit_logs WHERE event_id = '" + dead + "'").c_str()},
              {})
          .ok());
  ASSERT_TRUE(
      Db(Service::kAdmin)
          .Execute(
              pg::Statement{"lose2",
                            ("DELETE FROM consumer_inbox WHERE event_id = '" + dead + "'").c_str()},
              {})
          .ok());
  auto ops = opsv1::OutboxOperations::NewStub(mesh_->Channel(Service::kAuth, 0));
  auto call = [&](const opsv1::RedriveDeadOutboxRequest& req,
                  opsv1::RedriveDeadOutboxResponse* resp) {
    grpc::ClientContext ctx;
    As(&ctx, "olivia", {"audit.operator"});
    return ops->RedriveDeadOutbox(&ctx, req, resp);
  };
  opsv1::RedriveDeadOutboxResponse resp;
  {
    opsv1::RedriveDeadOutboxRequest req;  // no ids and no all: never "everything"
    req.set_reason("fixed");
    grpc::Status st = call(req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("every DEAD row"), std::string::npos) << st.error_message();
    EXPECT_EQ(server::ErrorDetails::Of(st).BadField(), "ids") << st.error_message();
  }
  {
    opsv1::RedriveDeadOutboxRequest req;  // one id is not DEAD: nothing changes
    req.mutable_ids()->add_event_ids(dead);
    req.mutable_ids()->add_event_ids(ids[2]);
    req.set_reason("fixed");
    grpc::Status st = call(req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find(ids[2] + " is not a DEAD row"), std::string::npos)
        << st.error_message();
    EXPECT_EQ(server::ErrorDetails::Of(st).BadField(), "ids.event_ids") << st.error_message();
    EXPECT_EQ(
        QueryInt(Db(Service::kAuth), "SELECT count(*) FROM audit_outbox WHERE state = 'DEAD'"), 1);
  }
  opsv1::RedriveDeadOutboxRequest req;
  req.mutable_ids()->add_event_ids(dead);
  req.set_reason("Redis ACL fixed");
  grpc::Status st = call(req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.redriven(), 1);
  ASSERT_TRUE(WaitFor(
      [&] {
        return Admin("SELECT count(*) FROM audit_logs WHERE event_id = '" + dead + "'") == 1 &&
               Admin("SELECT count(*) FROM audit_logs WHERE event_id = '" + resp.event_id() +
                     "' AND actor = 'olivia' AND action = 'redrive_dead_outbox' AND"
                     " new_value->'event_ids'->>0 = '" +
                     dead + "'") == 1;
      },
      std::chrono::seconds(30)));
  EXPECT_TRUE(WaitFor([&] { return AllConfirmed(); }, std::chrono::seconds(30)));
}

TEST_F(OperationsTest, AdminRequeuesDeadInboxRowsAndReplaysOrDiscardsPoisonWithItsOwnRecords) {
  const std::vector<std::string> ids = Mutate(1);
  ASSERT_TRUE(WaitFor([&] { return Admin("SELECT count(*) FROM audit_logs") == 2; },
                      std::chrono::seconds(30)));
  auto ops = adminv1::AdminOperations::NewStub(mesh_->Channel(Service::kAdmin, 0));
  auto ctx = [](grpc::ClientContext* c) { As(c, "olivia", {"audit.operator"}); };
  const std::string admin_key = mesh_->keys().admin().key_id();
  auto record = [&](const std::string& event_id, const std::string& type) {
    return Admin("SELECT count(*) FROM audit_logs WHERE event_id = '" + event_id +
                 "' AND owner = 'admin' AND event_type = '" + type +
                 "' AND actor = 'olivia' AND key_id = '" + admin_key + "' AND seal IS NOT NULL");
  };

  // --- a DEAD inbox row (its audit row never written; a row the lease
  // consumer gave up on kept its envelope and seal) ---
  const std::string dead = ids[0];
  for (const char* sql :
       {"UPDATE consumer_inbox i SET status = 'DEAD', attempts = 10, last_error = 'x',"
        " payload = a.envelope, seal = a.seal FROM audit_logs a"
        " WHERE a.event_id = i.event_id AND i.event_id = '%s'",
        "DELETE FROM audit_logs WHERE event_id = '%s'"}) {
    std::string q = sql;
    q.replace(q.find("%s"), 2, dead);
    ASSERT_TRUE(Db(Service::kAdmin).Execute(pg::Statement{"", q.c_str()}, {}).ok()) << q;
  }
  adminv1::ListDeadInboxResponse listed;
  {
    grpc::ClientContext c;
    As(&c, "rita", {"audit.reader"});
    EXPECT_EQ(ops->ListDeadInbox(&c, {}, &listed).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    grpc::ClientContext c;
    ctx(&c);
    ASSERT_TRUE(ops->ListDeadInbox(&c, {}, &listed).ok());
  }
  ASSERT_EQ(listed.dead_inbox_rows_size(), 1);
  EXPECT_EQ(listed.dead_inbox_rows(0).event_id(), dead);
  EXPECT_EQ(listed.dead_inbox_rows(0).last_error(), "x");
  {
    adminv1::RequeueDeadInboxRequest req;  // no ids, no all
    req.set_reason("fixed");
    adminv1::RequeueDeadInboxResponse resp;
    grpc::ClientContext c;
    ctx(&c);
    EXPECT_EQ(ops->RequeueDeadInbox(&c, req, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
    req.mutable_ids()->add_ids(listed.dead_inbox_rows(0).id() + 1000);
    grpc::ClientContext c2;
    ctx(&c2);
    grpc::Status st = ops->RequeueDeadInbox(&c2, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("is not a DEAD inbox row"), std::string::npos)
        << st.error_message();
    EXPECT_EQ(server::ErrorDetails::Of(st).BadField(), "ids.ids") << st.error_message();
  }
  adminv1::RequeueDeadInboxRequest requeue;
  requeue.mutable_ids()->add_ids(listed.dead_inbox_rows(0).id());
  requeue.set_reason("constraint fixed");
  adminv1::RequeueDeadInboxResponse requeued;
  {
    grpc::ClientContext c;
    ctx(&c);
    grpc::Status st = ops->RequeueDeadInbox(&c, requeue, &requeued);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  EXPECT_EQ(requeued.requeued(), 1);
  EXPECT_EQ(record(requeued.event_id(), "admin.inbox.requeued"), 1)
      << "committed with the change, before the RPC returned";
  {
    // AIP-155: a row DEAD again, requeued with a request id. The repeat (a
    // client that lost the reply) gets the first call's result and changes
    // nothing more.
    ASSERT_TRUE(Db(Service::kAdmin)
                    .Execute(pg::Statement{"",
                                           "UPDATE consumer_inbox i SET status = 'DEAD',"
                                           " payload = a.envelope, seal = a.seal"
                                           " FROM audit_logs a WHERE a.event_id = i.event_id"
                                           " AND i.event_id = $1::uuid"},
                             {pg::Text(ids[1])})
                    .ok());
    adminv1::RequeueDeadInboxRequest keyed;
    keyed.mutable_ids()->add_ids(QueryInt(
        Db(Service::kAdmin), "SELECT id FROM consumer_inbox WHERE event_id = '" + ids[1] + "'"));
    keyed.set_reason("requeued with a request id");
    keyed.set_request_id(::ulticode::testing::RequestIdFor("requeue-7f3c"));
    adminv1::RequeueDeadInboxResponse first, repeat;
    for (auto* resp : {&first, &repeat}) {
      grpc::ClientContext c;
      ctx(&c);
      grpc::Status st = ops->RequeueDeadInbox(&c, keyed, resp);
      ASSERT_TRUE(st.ok()) << st.error_message();
    }
    EXPECT_EQ(first.requeued(), 1);
    EXPECT_EQ(repeat.SerializeAsString(), first.SerializeAsString())
        << "the repeat answers with the first result";
    EXPECT_EQ(Admin("SELECT count(*) FROM audit_logs WHERE event_type = 'admin.inbox.requeued'"), 2)
        << "and writes no second record";
    EXPECT_EQ(record(first.event_id(), "admin.inbox.requeued"), 1);
    // The same id for another request is refused, naming request_id.
    keyed.set_reason("another reason");
    grpc::ClientContext c;
    ctx(&c);
    adminv1::RequeueDeadInboxResponse other;
    grpc::Status st = ops->RequeueDeadInbox(&c, keyed, &other);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(server::ErrorDetails::Of(st).BadField(), "request_id") << st.error_message();
  }
  EXPECT_TRUE(WaitFor(
      [&] { return Admin("SELECT count(*) FROM audit_logs WHERE event_id = '" + dead + "'") == 1; },
      std::chrono::seconds(30)))
      << "the lease consumer writes the requeued event";

  // --- poison: an event signed with a key Admin does not know yet ---
  RedisClientForTest redis(mesh_->auth_stream());
  auto fresh_key = crypto::SigningKey::Generate();
  ASSERT_TRUE(fresh_key.ok());
  const audit::AuditEvent late = testing::SampleEvent(audit::v1::OWNER_AUTH, "late-key");
  redis.Add(testing::EntryFields(late, &*fresh_key));
  redis::StreamFields unsigned_fields = testing::EntryFields(
      testing::SampleEvent(audit::v1::OWNER_AUTH, "unsigned"), &mesh_->keys().auth());
  unsigned_fields.erase(std::remove_if(unsigned_fields.begin(), unsigned_fields.end(),
                                       [](const auto& f) { return f.first == "seal"; }),
                        unsigned_fields.end());
  redis.Add(unsigned_fields);
  adminv1::ListPoisonResponse poison;
  ASSERT_TRUE(WaitFor(
      [&] {
        grpc::ClientContext c;
        ctx(&c);
        poison.Clear();
        return ops->ListPoison(&c, {}, &poison).ok() && poison.poison_entries_size() == 2;
      },
      std::chrono::seconds(30)));
  const adminv1::PoisonEntry& unknown = poison.poison_entries(0);
  EXPECT_EQ(unknown.reason(), "unknown_key");
  EXPECT_EQ(poison.poison_entries(1).reason(), "missing_signature");

  adminv1::ReplayPoisonRequest replay;
  replay.mutable_ids()->add_ids(unknown.id());
  replay.set_reason("auth rotated its key; directory updated");
  adminv1::ReplayPoisonResponse replayed;
  {
    grpc::ClientContext c;
    ctx(&c);
    ASSERT_TRUE(ops->ReplayPoison(&c, replay, &replayed).ok());
  }
  EXPECT_EQ(replayed.accepted(), 0) << "still unknown: nothing changes";
  ASSERT_EQ(replayed.still_poison_size(), 1);
  EXPECT_EQ(replayed.still_poison(0).reason(), "unknown_key");
  EXPECT_EQ(replayed.event_id(), "");
  // The fix: the key joins the directory (Admin re-reads the file).
  {
    std::ofstream keys(mesh_->keys().public_keys_file(), std::ios::app);
    keys << testing::TestKeys::Line("auth", *fresh_key) << "\n";
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        grpc::ClientContext c;
        ctx(&c);
        replayed.Clear();
        return ops->ReplayPoison(&c, replay, &replayed).ok() && replayed.accepted() == 1;
      },
      std::chrono::seconds(15)));
  EXPECT_EQ(Admin("SELECT count(*) FROM audit_logs WHERE event_id = '" + late.event_id() + "'"), 1);
  EXPECT_EQ(record(replayed.event_id(), "admin.poison.replayed"), 1);
  EXPECT_EQ(Admin("SELECT count(*) FROM poison_events WHERE resolution = 'replayed'"), 1);

  // --- discard what cannot be fixed; the entry stays as evidence ---
  adminv1::DiscardPoisonRequest discard;
  discard.mutable_all();  // every unresolved entry, of any poison reason
  adminv1::DiscardPoisonResponse discarded;
  {
    grpc::ClientContext c;
    ctx(&c);
    EXPECT_EQ(ops->DiscardPoison(&c, discard, &discarded).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT)
        << "a reason is required";
  }
  discard.set_reason("producer bug, fixed in auth 1.2");
  {
    grpc::ClientContext c;
    ctx(&c);
    ASSERT_TRUE(ops->DiscardPoison(&c, discard, &discarded).ok());
  }
  EXPECT_EQ(discarded.discarded(), 1);
  EXPECT_EQ(record(discarded.event_id(), "admin.poison.discarded"), 1);
  EXPECT_EQ(Admin("SELECT count(*) FROM poison_events WHERE resolution = 'discarded'"), 1);
  {
    grpc::ClientContext c;
    ctx(&c);
    poison.Clear();
    ASSERT_TRUE(ops->ListPoison(&c, {}, &poison).ok());
    EXPECT_EQ(poison.poison_entries_size(), 0);
  }
}

// A poison entry keeps up to 256 KiB of whatever was sent: ListPoison ends
// a page at its byte budget, so 30 entries of ~200 KB come in pages any gRPC
// client accepts (under 4 MiB), together holding every entry once.
TEST_F(OperationsTest, ListPoisonPagesStopAtTheirByteBudget) {
  ASSERT_EQ(Admin("WITH added AS (INSERT INTO poison_events"
                  " (consumer, stream, stream_entry_id, reason, detail, fields)"
                  " SELECT 'audit_logs', 'audit:auth', g || '-0', 'bad_signature', 'test',"
                  "   jsonb_build_array(jsonb_build_object('name', 'payload',"
                  "     'text', repeat('a', 200000) || g))"
                  " FROM generate_series(1, 30) g RETURNING 1) SELECT count(*) FROM added"),
            30);
  auto ops = adminv1::AdminOperations::NewStub(mesh_->Channel(Service::kAdmin, 0));
  adminv1::ListPoisonRequest req;
  req.set_page_size(500);
  std::set<int64_t> ids;
  int pages = 0;
  for (; pages < 100; ++pages) {
    grpc::ClientContext c;
    As(&c, "olga", {"audit.operator"});
    adminv1::ListPoisonResponse resp;
    const grpc::Status s = ops->ListPoison(&c, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
    EXPECT_LT(resp.ByteSizeLong(), 4u << 20);
    for (const auto& e : resp.poison_entries()) ids.insert(e.id());
    if (resp.next_page_token().empty()) break;
    req.set_page_token(resp.next_page_token());
  }
  EXPECT_GE(pages, 1);  // 30 x ~200 KB = ~6 MB: two pages at least
  EXPECT_EQ(ids.size(), 30u);
}

}  // namespace
}  // namespace ulticode
