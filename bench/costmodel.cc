// ulticode-costmodel: what each stage of an audited mutation costs on this
// machine when it runs alone (docs/performance.md, "Cost model"). Each stage
// runs the project's own code for that stage, or, for the floors, the least
// that stage needs, against the real PostgreSQL and Redis of the benchmark's
// mesh, in scratch databases and streams of its own:
//
//   grpc      a unary CreateUser with a bearer token to a server built like
//             the owners' (server::GrpcServer, the callback API, each call
//             run on a server::CallExecutor thread; --grpc-api=sync: the
//             synchronous API) whose handler does nothing; the server is a
//             child process, so its CPU is told apart
//   crypto    Ed25519 sign and verify of a real envelope (once a bundle in
//             the pipeline), its row MAC, SHA-256 of it, and an inclusion
//             proof's verification
//   txn       the CreateUser transaction through libpq with our statements
//             (mutation::RunMutation, auth::store), 8 threads
//   publish   the dispatcher's cycle (outbox::Dispatcher::RunOnce): lock due
//             rows, check their MACs, seal them as one bundle, XADD them
//             pipelined, mark them PUBLISHED
//   xadd      the floor of that XADD: the same entries, pipelined
//   xread     XREADGROUP + XACK at the bridge's batch size
//   inbox     Admin's validation, consumer_inbox and audit_logs inserts of
//             those entries at the bridge's batch size (PrepareBatch,
//             InsertBatch), one synchronous commit a batch
//   log       the log's sequencing and hashing (Sequencer::RunOnce)
//   prove     the witness feed's inclusion proofs from the stored nodes
//             (NodeCache, StoredInclusionProof), 256 consecutive leaves a batch
//   confirm   the owner's confirmation of those rows at the proofs' batch
//             size: PayloadsOf, each seal (one verification a bundle), leaf
//             hash and proof verified, ConfirmLogged
//
// Prints one JSON object: per stage, operations and CPU microseconds per
// operation of this process ("client"), the gRPC child ("server"), every
// PostgreSQL process and Redis. The PostgreSQL password comes from
// PGPASSFILE, Redis's from --redis-password-file; neither is ever printed.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "admin/inbox/batch.h"
#include "admin/migrations.h"
#include "admin/transparency/log_reader.h"
#include "admin/transparency/sequencer.h"
#include "auth/auth_events.h"
#include "auth/auth_service.h"
#include "auth/auth_store.h"
#include "auth/migrations.h"
#include "bench/cpu_meter.h"
#include "common/base/status_macros.h"
#include "common/config/flags.h"
#include "common/crypto/crypto.h"
#include "common/crypto/key_directory.h"
#include "common/ids/uuid.h"
#include "common/migrations/migrations.h"
#include "common/pg/pool.h"
#include "common/redis/redis_client.h"
#include "common/seal/seal.h"
#include "common/server/call_executor.h"
#include "common/server/grpc_server.h"
#include "common/tlog/leaf.h"
#include "common/tlog/merkle.h"
#include "common/tlog/note.h"
#include "common/tlog/stored.h"
#include "grpcpp/grpcpp.h"
#include "owner/mutation/mutation.h"
#include "owner/outbox/dispatcher.h"
#include "owner/outbox/outbox_store.h"
#include "owner/runtime/owner_service.h"
#include "prometheus/registry.h"
#include "ulticode/auth/v1/auth.grpc.pb.h"

namespace ulticode::bench {
namespace {

constexpr char kAuthDb[] = "ulticode_costmodel_auth";
constexpr char kAdminDb[] = "ulticode_costmodel_admin";
constexpr char kStream[] = "costmodel:audit:auth";
constexpr char kFloorStream[] = "costmodel:xadd";
constexpr char kGroup[] = "costmodel";

struct Options {
  std::string pg_host = "127.0.0.1";
  int pg_port = 5432;
  std::string redis = "127.0.0.1:6379";
  std::string redis_user;
  std::string redis_password_file;
  int grpc_port = 0;
  int grpc_clients = 32;
  // How the no-op server serves: "executor" (the owners' callback services
  // on a server::CallExecutor) or "sync" (the synchronous API, as Admin).
  std::string grpc_api = "executor";
  int txn_threads = 8;
  int batch = 256;  // the dispatcher's, the bridge's and a proof entry's batch
  absl::Duration seconds = absl::Seconds(5);
};

// One stage's result: operations and CPU per operation by process.
struct Stage {
  std::string name;
  int64_t ops = 0;
  CpuSpent spent;
  std::vector<std::pair<std::string, double>> extra;  // figures of its own

  std::string Json() const {
    auto per_op = [&](double us) { return ops > 0 ? us / static_cast<double>(ops) : 0.0; };
    std::vector<std::string> cpu = {absl::StrCat("\"client\":", per_op(spent.self_us))};
    if (spent.child_us > 0) cpu.push_back(absl::StrCat("\"server\":", per_op(spent.child_us)));
    for (const auto& [n, us] : spent.by_name)
      cpu.push_back(absl::StrCat("\"", n, "\":", per_op(us)));
    std::vector<std::string> more;
    for (const auto& [k, v] : extra) more.push_back(absl::StrCat(",\"", k, "\":", v));
    return absl::StrCat("\"", name, "\":{\"ops\":", ops, ",\"cpu_us_per_op\":{",
                        absl::StrJoin(cpu, ","), "}", absl::StrJoin(more, ""), "}");
  }
};

// ---- grpc ------------------------------------------------------------------

class NoopAuth final : public auth::v1::AuthService::Service {
  grpc::Status CreateUser(grpc::ServerContext*, const auth::v1::CreateUserRequest*,
                          auth::v1::CreateUserResponse*) override {
    return grpc::Status::OK;
  }
};

// As the owners serve: the callback API, each call run on a
// server::CallExecutor thread (one per pooled connection).
class NoopAuthCallback final : public auth::v1::AuthService::CallbackService {
 public:
  explicit NoopAuthCallback(server::CallExecutor& calls) : calls_(calls) {}
  grpc::ServerUnaryReactor* CreateUser(grpc::CallbackServerContext* ctx,
                                       const auth::v1::CreateUserRequest*,
                                       auth::v1::CreateUserResponse*) override {
    return calls_.Run(ctx, [] { return grpc::Status::OK; });
  }

 private:
  server::CallExecutor& calls_;
};

// The child: a server built like the services' (bounded threads, health,
// reflection, the metrics interceptor) until its parent ends it.
[[noreturn]] void ServeNoop(int port, const std::string& api) {
  prctl(PR_SET_NAME, "costmodel-srv");
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the tool
  prometheus::Registry registry;
  server::ServerOptions options;
  options.listen = absl::StrCat("127.0.0.1:", port);
  options.access_log = false;  // as the benchmark runs the services
  server::GrpcServer grpc_server(options, registry);
  NoopAuth noop;
  server::CallExecutor calls(server::ExecutorOptions{}, registry);  // the services' defaults
  NoopAuthCallback callback(calls);
  if (api == "sync") {
    grpc_server.AddService(&noop, "ulticode.auth.v1.AuthService");
  } else {
    grpc_server.AddService(&callback, "ulticode.auth.v1.AuthService");
  }
  if (!grpc_server.Start().ok()) _exit(3);
  grpc_server.SetServing(true);
  pause();
  _exit(0);
}

// A closed loop's state, shared with every call's callback so that it
// outlives the last one (a callback still unlocking `mu` after the waiter
// returned would otherwise touch freed memory).
struct NoopLoop {
  std::unique_ptr<auth::v1::AuthService::Stub> stub;
  std::string token;
  absl::Time deadline;
  std::mutex mu;
  std::condition_variable done;
  int in_flight = 0;
  int64_t ok = 0;
  int64_t failed = 0;
};

void IssueNoop(std::shared_ptr<NoopLoop> loop) {
  auto ctx = std::make_shared<grpc::ClientContext>();
  // A call that never ends would stop the stage: it fails instead.
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  ctx->AddMetadata("authorization", loop->token);
  auto req = std::make_shared<auth::v1::CreateUserRequest>();
  req->set_username("costmodel_user");
  req->set_email("costmodel_user@bench.example");
  req->set_request_id(ids::NewUuidV7());
  auto resp = std::make_shared<auth::v1::CreateUserResponse>();
  NoopLoop* l = loop.get();
  // The next call is made outside the lock: a callback may run inline.
  l->stub->async()->CreateUser(ctx.get(), req.get(), resp.get(),
                               [loop = std::move(loop), ctx, req, resp](grpc::Status s) {
                                 bool again = false;
                                 {
                                   std::lock_guard<std::mutex> lock(loop->mu);
                                   ++(s.ok() ? loop->ok : loop->failed);
                                   again = absl::Now() < loop->deadline;
                                   if (!again && --loop->in_flight == 0) loop->done.notify_all();
                                 }
                                 if (again) IssueNoop(loop);
                               });
}

// Closed loop: `clients` calls always in flight for `seconds`. Returns the
// calls that succeeded and those that failed.
std::pair<int64_t, int64_t> CallNoop(const Options& o) {
  auto loop = std::make_shared<NoopLoop>();
  loop->stub = auth::v1::AuthService::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", o.grpc_port), grpc::InsecureChannelCredentials()));
  loop->token = "Bearer " + std::string(300, 't');  // a JWT's size
  loop->deadline = absl::Now() + o.seconds;
  loop->in_flight = o.grpc_clients;
  for (int i = 0; i < o.grpc_clients; ++i) IssueNoop(loop);
  std::unique_lock<std::mutex> lock(loop->mu);
  loop->done.wait(lock, [&] { return loop->in_flight == 0; });
  return {loop->ok, loop->failed};
}

Stage GrpcStage(const Options& o, pid_t server) {
  auto probe = grpc::CreateChannel(absl::StrCat("127.0.0.1:", o.grpc_port),
                                   grpc::InsecureChannelCredentials());
  if (!probe->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
    std::fprintf(stderr, "ulticode-costmodel: the no-op server did not start\n");
    std::exit(1);
  }
  Options warm_up = o;  // connections and threads first
  warm_up.seconds = absl::Seconds(1);
  CallNoop(warm_up);
  const CpuMeter meter({}, server);
  const CpuReading before = meter.Read();
  const auto [ok, failed] = CallNoop(o);
  return {"grpc", ok, meter.Read() - before, {{"failed", static_cast<double>(failed)}}};
}

// ---- databases ---------------------------------------------------------------

pg::ConnectOptions Database(const Options& o, const std::string& db) {
  pg::ConnectOptions c;
  c.conninfo = absl::StrCat("host=", o.pg_host, " port=", o.pg_port, " user=postgres dbname=", db);
  c.application_name = "ulticode-costmodel";
  return c;
}

// A fresh scratch database with `migrations` applied.
absl::Status Recreate(const Options& o, const std::string& db,
                      const std::vector<migrations::Migration>& migrations) {
  ASSIGN_OR_RETURN(auto server, pg::Connection::Connect(Database(o, "postgres")));
  RETURN_IF_ERROR(server->ExecuteScript(
      "drop", absl::StrCat("DROP DATABASE IF EXISTS ", db, " WITH (FORCE)"), absl::Minutes(1)));
  RETURN_IF_ERROR(
      server->ExecuteScript("create", absl::StrCat("CREATE DATABASE ", db), absl::Minutes(1)));
  ASSIGN_OR_RETURN(auto conn, pg::Connection::Connect(Database(o, db)));
  return migrations::Apply(*conn, migrations).status();
}

// ---- crypto ------------------------------------------------------------------

audit::AuditEvent SampleEvent() {
  auth::store::UserRow user{ids::NewUuidV7(), "costmodel_user", "costmodel_user@bench.example",
                            "costmodel_user", "ACTIVE",         0,
                            absl::Now(),      absl::Now()};
  return auth::events::UserCreated(
      {"svc:bench", "127.0.0.1", "ulticode-loadgen", ids::NewUuidV7(), ""}, user);
}

// CPU microseconds per call of `f`, over about a second.
template <typename F>
double PerCall(F&& f) {
  const CpuMeter meter({});
  const CpuReading before = meter.Read();
  const absl::Time end = absl::Now() + absl::Seconds(1);
  int64_t n = 0;
  for (; absl::Now() < end; ++n) f();
  return (meter.Read() - before).self_us / static_cast<double>(n);
}

Stage CryptoStage(const crypto::SigningKey& key) {
  const std::string envelope = SampleEvent().SerializeAsString();
  const std::string signature = *key.Sign(envelope);
  std::vector<tlog::Hash> leaves(1 << 20 >> 6);  // a proof of 14 hashes
  for (size_t i = 0; i < leaves.size(); ++i) leaves[i] = tlog::LeafHash(absl::StrCat(i));
  const std::vector<tlog::Hash> proof = *tlog::InclusionProof(7, leaves);
  const tlog::Hash root = tlog::RootOf(leaves);
  Stage s{"crypto", 0, {}, {}};
  s.extra = {{"envelope_bytes", static_cast<double>(envelope.size())},
             {"sign_us", PerCall([&] { (void)key.Sign(envelope); })},
             {"verify_us", PerCall([&] { (void)key.public_key().Verify(envelope, signature); })},
             {"sha256_us", PerCall([&] { (void)crypto::Sha256(envelope); })},
             {"row_mac_us", PerCall([&] { (void)outbox::RowMac(key, envelope); })},
             {"inclusion_proof_hashes", static_cast<double>(proof.size())},
             {"inclusion_verify_us", PerCall([&] {
                (void)tlog::VerifyInclusion(7, leaves.size(), leaves[7], proof, root);
              })}};
  return s;
}

// ---- txn ---------------------------------------------------------------------

absl::Status CreateUser(pg::Pool& pool, const crypto::SigningKey& key, int64_t n) {
  auth::v1::CreateUserRequest req;
  req.set_username(absl::StrCat("cm", n, "_", absl::ToUnixMicros(absl::Now())));
  req.set_email(absl::StrCat(req.username(), "@bench.example"));
  req.set_request_id(ids::NewUuidV7());
  const audit::Actor actor{"svc:bench", "127.0.0.1", "ulticode-loadgen", req.request_id(), ""};
  return mutation::RunMutation<auth::v1::CreateUserResponse>(
             pool, key, "CreateUser", req, actor.principal, req.request_id(),
             [&](pg::Transaction& tx) { return auth::CreateUserIn(tx, actor, req); })
      .status();
}

Stage TxnStage(const Options& o, const crypto::SigningKey& key) {
  pg::PoolOptions pool_options;
  pool_options.connect = Database(o, kAuthDb);
  pool_options.max_size = o.txn_threads;
  pg::Pool pool(pool_options);
  std::atomic<int64_t> ok{0}, next{0};
  const CpuMeter meter({"postgres"});
  const CpuReading before = meter.Read();
  const absl::Time end = absl::Now() + o.seconds;
  std::vector<std::thread> threads;
  for (int t = 0; t < o.txn_threads; ++t) {
    threads.emplace_back([&] {
      while (absl::Now() < end) {
        if (CreateUser(pool, key, next++).ok()) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  return {"txn", ok.load(), meter.Read() - before, {}};
}

// ---- publish, xadd, xread ----------------------------------------------------------

absl::StatusOr<Stage> PublishStage(const Options& o, const crypto::SigningKey& key,
                                   redis::Client& redis) {
  pg::ConnectOptions c = Database(o, kAuthDb);
  c.asynchronous_commit = true;  // as the dispatcher's connection
  ASSIGN_OR_RETURN(auto conn, pg::Connection::Connect(c));
  prometheus::Registry registry;
  outbox::DispatcherOptions d;
  d.owner = audit::v1::OWNER_AUTH;
  d.stream = kStream;
  d.batch_size = o.batch;
  d.signer = &key;
  outbox::Dispatcher dispatcher(d, registry);
  const CpuMeter meter({"postgres", "redis-server"});
  const CpuReading before = meter.Read();
  int64_t published = 0;
  for (;;) {
    ASSIGN_OR_RETURN(outbox::CycleResult r, dispatcher.RunOnce(*conn, redis));
    if (r.claimed == 0) break;
    published += r.published;
  }
  return Stage{"publish", published, meter.Read() - before, {}};
}

absl::StatusOr<std::vector<redis::StreamEntry>> AllEntries(redis::Client& redis) {
  ASSIGN_OR_RETURN(std::vector<redis::StreamEntry> all,
                   redis.XRead(kStream, 1 << 30, absl::ZeroDuration(), "0"));
  return all;
}

absl::StatusOr<Stage> XAddStage(const Options& o, redis::Client& redis,
                                const std::vector<redis::StreamEntry>& all) {
  const CpuMeter meter({"redis-server"});
  const CpuReading before = meter.Read();
  for (size_t i = 0; i < all.size(); i += o.batch) {
    std::vector<redis::StreamFields> batch;
    for (size_t j = i; j < std::min(all.size(), i + o.batch); ++j) batch.push_back(all[j].fields);
    RETURN_IF_ERROR(redis.XAddBatch(kFloorStream, batch).status());
  }
  return Stage{"xadd", static_cast<int64_t>(all.size()), meter.Read() - before, {}};
}

// Reads every entry of the stream through a group, acknowledging each batch.
absl::StatusOr<Stage> XReadStage(const Options& o, redis::Client& redis,
                                 std::vector<redis::StreamEntry>* read) {
  RETURN_IF_ERROR(redis.XGroupCreate(kStream, kGroup, "0").status());
  const CpuMeter meter({"redis-server"});
  const CpuReading before = meter.Read();
  for (;;) {
    ASSIGN_OR_RETURN(auto got,
                     redis.XReadGroup(kGroup, "bridge", {kStream}, o.batch, absl::ZeroDuration()));
    if (got.empty() || got[0].entries.empty()) break;
    std::vector<std::string> ids;
    for (auto& e : got[0].entries) {
      ids.push_back(e.id);
      read->push_back(std::move(e));
    }
    RETURN_IF_ERROR(redis.XAck(kStream, kGroup, ids).status());
  }
  return Stage{"xread", static_cast<int64_t>(read->size()), meter.Read() - before, {}};
}

// ---- inbox, log, confirm -----------------------------------------------------------

absl::StatusOr<Stage> InboxStage(const Options& o, const crypto::SigningKey& key,
                                 const std::vector<redis::StreamEntry>& entries) {
  ASSIGN_OR_RETURN(auto conn, pg::Connection::Connect(Database(o, kAdminDb)));
  ASSIGN_OR_RETURN(const crypto::KeyDirectory keys,
                   crypto::KeyDirectory::Parse(
                       absl::StrCat("auth ", absl::Base64Escape(key.public_key().raw()), "\n")));
  seal::Verifier seals;
  const CpuMeter meter({"postgres"});
  const CpuReading before = meter.Read();
  int64_t written = 0;
  for (size_t i = 0; i < entries.size(); i += o.batch) {
    std::vector<admin::inbox::BatchItem> items;
    for (size_t j = i; j < std::min(entries.size(), i + o.batch); ++j) {
      items.push_back({audit::v1::OWNER_AUTH, kStream, &entries[j]});
    }
    const admin::inbox::PreparedBatch batch =
        admin::inbox::PrepareBatch(items, absl::Now(), keys, seals, {});
    ASSIGN_OR_RETURN(pg::Transaction tx, conn->Begin());
    ASSIGN_OR_RETURN(
        admin::inbox::InsertedBatch inserted,
        admin::inbox::InsertBatch(tx, "costmodel", batch, admin::inbox::InsertAs::kProcessed));
    RETURN_IF_ERROR(tx.Commit());
    written += inserted.written;
  }
  return Stage{"inbox", written, meter.Read() - before, {}};
}

absl::StatusOr<Stage> LogStage(const Options& o, const crypto::SigningKey& key) {
  ASSIGN_OR_RETURN(auto conn, pg::Connection::Connect(Database(o, kAdminDb)));
  ASSIGN_OR_RETURN(const tlog::NoteSigner signer, tlog::NoteSigner::Create("costmodel", key));
  admin::transparency::Sequencer sequencer({"costmodel", &signer, 1000, absl::Milliseconds(500)});
  const CpuMeter meter({"postgres"});
  const CpuReading before = meter.Read();
  int64_t sequenced = 0;
  for (;;) {
    ASSIGN_OR_RETURN(auto run, sequencer.RunOnce(*conn));
    sequenced += run.sequenced;
    if (run.taken < 1000) break;
  }
  return Stage{"log", sequenced, meter.Read() - before, {}};
}

// Every leaf's inclusion proof in the tree of all of them, as the witness
// feed makes them for its owners.
struct Proven {
  uint64_t size = 0;
  tlog::Hash root;
  absl::flat_hash_map<std::string, std::pair<uint64_t, std::vector<tlog::Hash>>> by_event;
};

constexpr pg::Statement kLeaves{
    "costmodel.leaves", "SELECT event_id::text, log_index FROM log_leaves ORDER BY log_index"};

absl::StatusOr<Stage> ProveStage(const Options& o, Proven* proven) {
  ASSIGN_OR_RETURN(auto conn, pg::Connection::Connect(Database(o, kAdminDb)));
  ASSIGN_OR_RETURN(pg::Result leaves, conn->Execute(kLeaves));
  proven->size = static_cast<uint64_t>(leaves.rows());
  const CpuMeter meter({"postgres"});
  const CpuReading before = meter.Read();
  for (uint64_t first = 0; first < proven->size; first += o.batch) {
    const uint64_t last = std::min(proven->size, first + o.batch);
    admin::transparency::NodeCache nodes(*conn);
    RETURN_IF_ERROR(nodes.Prefetch(first, last, proven->size));
    for (uint64_t i = first; i < last; ++i) {
      ASSIGN_OR_RETURN(std::vector<tlog::Hash> proof,
                       tlog::StoredInclusionProof(i, proven->size, nodes.Reader()));
      proven->by_event[leaves.GetString(static_cast<int>(i), 0)] = {i, std::move(proof)};
    }
  }
  Stage stage{"prove", static_cast<int64_t>(proven->size), meter.Read() - before, {}};
  admin::transparency::NodeCache nodes(*conn);
  ASSIGN_OR_RETURN(proven->root, tlog::StoredRoot(proven->size, nodes.Reader()));
  return stage;
}

// As the owner's witness confirms (outbox/witness.cc, ConfirmProved): the
// rows' payloads, each leaf's seal (one verification a bundle), its
// inclusion proof, then CONFIRMED.
absl::StatusOr<Stage> ConfirmStage(const Options& o, const crypto::SigningKey& key,
                                   const std::vector<redis::StreamEntry>& entries,
                                   const Proven& proven) {
  pg::ConnectOptions c = Database(o, kAuthDb);
  c.asynchronous_commit = true;  // as the proof reader's connection
  ASSIGN_OR_RETURN(auto conn, pg::Connection::Connect(c));
  // What the proofs carry: each event's seal, as the log holds it.
  absl::flat_hash_map<std::string, std::string> seal_of;
  for (const redis::StreamEntry& e : entries) {
    audit::AuditEvent event;
    event.ParseFromString(*redis::FieldOf(e.fields, audit::kEnvelopeField));
    seal_of[event.event_id()] = *redis::FieldOf(e.fields, audit::kSealField);
  }
  seal::Verifier seals;
  const CpuMeter meter({"postgres"});
  const CpuReading before = meter.Read();
  int64_t confirmed = 0;
  std::vector<std::string> all_ids;
  for (const auto& [id, unused] : seal_of) all_ids.push_back(id);
  for (size_t i = 0; i < all_ids.size(); i += o.batch) {
    const std::vector<std::string> ids(
        all_ids.begin() + static_cast<std::ptrdiff_t>(i),
        all_ids.begin() + static_cast<std::ptrdiff_t>(std::min(all_ids.size(), i + o.batch)));
    ASSIGN_OR_RETURN(std::vector<outbox::OutboxPayload> rows, outbox::PayloadsOf(*conn, ids));
    std::vector<outbox::Proved> proved;
    for (const outbox::OutboxPayload& row : rows) {
      const auto it = proven.by_event.find(row.event_id);
      if (it == proven.by_event.end()) return absl::NotFoundError("a row not in the log");
      const std::string& sealed = seal_of.at(row.event_id);
      RETURN_IF_ERROR(seals.Verify(key.public_key(), row.payload, sealed));
      const auto& [index, proof] = it->second;
      RETURN_IF_ERROR(tlog::VerifyInclusion(
          index, proven.size,
          tlog::LeafHash(
              tlog::EncodeLeaf({"auth", row.event_id, key.key_id(), sealed, row.payload})),
          proof, proven.root));
      proved.push_back({row.event_id, key.key_id(), sealed});
    }
    ASSIGN_OR_RETURN(const int64_t n, outbox::ConfirmLogged(*conn, proved));
    confirmed += n;
  }
  return Stage{"confirm", confirmed, meter.Read() - before, {}};
}

absl::StatusOr<std::vector<Stage>> DataStages(const Options& o, const crypto::SigningKey& key) {
  RETURN_IF_ERROR(Recreate(o, kAuthDb, runtime::WithOutboxMigrations(auth::Migrations())));
  RETURN_IF_ERROR(Recreate(o, kAdminDb, admin::Migrations()));
  redis::Options ro;
  RETURN_IF_ERROR(redis::ParseAddress(o.redis, &ro));
  ro.user = o.redis_user;
  if (!o.redis_password_file.empty()) {
    ASSIGN_OR_RETURN(ro.password, crypto::ReadSecretFile(o.redis_password_file));
  }
  ro.command_timeout = absl::Seconds(30);
  redis::Client redis(ro);
  RETURN_IF_ERROR(redis.Command({"DEL", kStream, kFloorStream}).status());
  std::vector<Stage> stages;
  stages.push_back(TxnStage(o, key));
  ASSIGN_OR_RETURN(Stage publish, PublishStage(o, key, redis));
  stages.push_back(std::move(publish));
  ASSIGN_OR_RETURN(const std::vector<redis::StreamEntry> all, AllEntries(redis));
  ASSIGN_OR_RETURN(Stage xadd, XAddStage(o, redis, all));
  stages.push_back(std::move(xadd));
  std::vector<redis::StreamEntry> read;
  ASSIGN_OR_RETURN(Stage xread, XReadStage(o, redis, &read));
  stages.push_back(std::move(xread));
  ASSIGN_OR_RETURN(Stage inbox, InboxStage(o, key, read));
  stages.push_back(std::move(inbox));
  ASSIGN_OR_RETURN(Stage log, LogStage(o, key));
  stages.push_back(std::move(log));
  Proven proven;
  ASSIGN_OR_RETURN(Stage prove, ProveStage(o, &proven));
  stages.push_back(std::move(prove));
  ASSIGN_OR_RETURN(Stage confirm, ConfirmStage(o, key, read, proven));
  stages.push_back(std::move(confirm));
  RETURN_IF_ERROR(redis.Command({"DEL", kStream, kFloorStream}).status());
  return stages;
}

}  // namespace
}  // namespace ulticode::bench

int main(int argc, char** argv) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as the services
  using namespace ulticode;
  bench::Options o;
  config::Flags flags("ulticode-costmodel",
                      "The CPU of each stage of an audited mutation, each run alone; prints JSON.");
  flags.String("pg-host", &o.pg_host, "PostgreSQL host (superuser postgres; password: PGPASSFILE)");
  flags.Int("pg-port", &o.pg_port, "PostgreSQL port", 1, 65535);
  flags.String("redis-addr", &o.redis, "Redis address", config::ValidateHostPort);
  flags.String("redis-user", &o.redis_user, "Redis ACL user with every command on costmodel:*");
  flags.String("redis-password-file", &o.redis_password_file, "that user's password");
  flags.Int("grpc-port", &o.grpc_port, "a free port for the no-op gRPC server", 1, 65535);
  flags.Require("grpc-port");
  flags.Int("grpc-clients", &o.grpc_clients, "gRPC calls in flight", 1, 1024);
  flags.String("grpc-api", &o.grpc_api,
               "how the no-op server serves: executor (the owners' callback services) or sync",
               [](absl::string_view v) -> absl::Status {
                 if (v == "executor" || v == "sync") return absl::OkStatus();
                 return absl::InvalidArgumentError("must be executor or sync");
               });
  flags.Int("txn-threads", &o.txn_threads, "threads issuing business transactions", 1, 64);
  flags.Int("batch", &o.batch, "rows a dispatcher cycle, entries a bridge batch, proofs an entry",
            1, 4096);
  flags.Duration("seconds", &o.seconds, "how long the grpc and txn stages run", absl::Seconds(1),
                 absl::Minutes(10));
  config::ParseOrExit(flags, argc, argv);

  // Before any thread exists: the no-op server is a child of its own.
  const pid_t server = fork();
  if (server == 0) bench::ServeNoop(o.grpc_port, o.grpc_api);
  const bench::Stage grpc_stage = bench::GrpcStage(o, server);
  kill(server, SIGKILL);
  waitpid(server, nullptr, 0);

  auto key = crypto::SigningKey::Generate();
  if (!key.ok()) return 1;
  std::vector<bench::Stage> stages = {grpc_stage, bench::CryptoStage(*key)};
  auto data = bench::DataStages(o, *key);
  if (!data.ok()) {
    std::fprintf(stderr, "ulticode-costmodel: %s\n", data.status().ToString().c_str());
    return 1;
  }
  stages.insert(stages.end(), data->begin(), data->end());
  std::vector<std::string> parts;
  for (const bench::Stage& s : stages) parts.push_back(s.Json());
  std::printf("{%s}\n", absl::StrJoin(parts, ",").c_str());
  return 0;
}
