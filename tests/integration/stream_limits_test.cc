// The server's own reflection service and its limits, against a real
// in-process GrpcServer: it answers what grpcurl and buf curl ask (services,
// files with their imports, symbols, errors), a stream idle past its limit is
// ended, streams beyond the cap are refused, and an idle connection is closed.
// (That idle streams hold no thread is proven on the real binaries,
// server_test IdleStreamsAndConnectionsHoldNoThreads.)
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/metrics/metrics.h"
#include "common/server/grpc_server.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "tests/support/metric_text.h"
#include "tests/support/test_env.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"

namespace ulticode {
namespace {

namespace refl = grpc::reflection::v1alpha;
using Stream =
    grpc::ClientReaderWriter<refl::ServerReflectionRequest, refl::ServerReflectionResponse>;

// Opens watches with `open` until one is served (the server forgets an
// ended one a moment after the client sees it end).
template <typename Open, typename Watches, typename Contexts>
bool WaitForWatch(Open& open, Watches& watches, Contexts& contexts) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (open() == grpc::health::v1::HealthCheckResponse::SERVING) return true;
    (void)watches.back()->Finish();
    watches.pop_back();
    contexts.pop_back();
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

class StreamLimitsTest : public ::testing::Test {
 protected:
  void Start(server::ServerOptions o) {
    metrics_ = metrics::Metrics::Unexposed("limits");
    server_ = std::make_unique<server::GrpcServer>(std::move(o), metrics_->registry());
    server_->AddService(&admin_, "ulticode.admin.v1.AdminService");
    ASSERT_TRUE(server_->Start().ok());
    server_->SetServing(true);
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channel_ = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                         grpc::InsecureChannelCredentials(), args);
    stub_ = refl::ServerReflection::NewStub(channel_);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(absl::Seconds(1));
  }

  refl::ServerReflectionResponse Ask(const refl::ServerReflectionRequest& req) {
    grpc::ClientContext ctx;
    auto rw = stub_->ServerReflectionInfo(&ctx);
    EXPECT_TRUE(rw->Write(req));
    refl::ServerReflectionResponse resp;
    EXPECT_TRUE(rw->Read(&resp));
    rw->WritesDone();
    EXPECT_TRUE(rw->Finish().ok());
    return resp;
  }

  std::set<std::string> Files(const refl::ServerReflectionResponse& resp) {
    std::set<std::string> names;
    for (const auto& bytes : resp.file_descriptor_response().file_descriptor_proto()) {
      google::protobuf::FileDescriptorProto file;
      EXPECT_TRUE(file.ParseFromString(bytes));
      names.insert(file.name());
    }
    return names;
  }

  admin::v1::AdminService::Service admin_;  // every method UNIMPLEMENTED
  std::unique_ptr<metrics::Metrics> metrics_;
  std::unique_ptr<server::GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<refl::ServerReflection::Stub> stub_;
};

TEST_F(StreamLimitsTest, ReflectionAnswersServicesFilesSymbolsAndErrors) {
  Start(server::PlaintextOptions("127.0.0.1:0", 4));
  refl::ServerReflectionRequest list;
  list.set_host("h");
  list.set_list_services("*");
  const auto services = Ask(list);
  EXPECT_EQ(services.valid_host(), "h");
  EXPECT_EQ(services.original_request().list_services(), "*");
  std::set<std::string> names;
  for (const auto& s : services.list_services_response().service()) names.insert(s.name());
  EXPECT_EQ(names,
            (std::set<std::string>{"grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
                                   "grpc.reflection.v1alpha.ServerReflection",
                                   "ulticode.admin.v1.AdminService"}));

  refl::ServerReflectionRequest symbol;
  symbol.set_file_containing_symbol("ulticode.admin.v1.AdminService");
  const auto files = Files(Ask(symbol));
  EXPECT_TRUE(files.count("ulticode/admin/v1/admin.proto")) << files.size();
  EXPECT_TRUE(files.count("ulticode/audit/v1/audit.proto"));  // an import, with it
  EXPECT_TRUE(files.count("google/protobuf/timestamp.proto"));

  refl::ServerReflectionRequest by_name;
  by_name.set_file_by_filename("grpc/health/v1/health.proto");
  EXPECT_EQ(Files(Ask(by_name)), std::set<std::string>{"grpc/health/v1/health.proto"});

  refl::ServerReflectionRequest method;  // a method's full name is a symbol too
  method.set_file_containing_symbol("grpc.health.v1.Health.Check");
  EXPECT_EQ(Files(Ask(method)), std::set<std::string>{"grpc/health/v1/health.proto"});

  refl::ServerReflectionRequest unknown;
  unknown.set_file_containing_symbol("no.such.Thing");
  const auto error = Ask(unknown);
  EXPECT_EQ(error.error_response().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(error.error_response().error_message(), "symbol no.such.Thing not found");

  refl::ServerReflectionRequest extensions;
  extensions.set_all_extension_numbers_of_type("google.protobuf.Timestamp");
  EXPECT_EQ(Ask(extensions).all_extension_numbers_response().base_type_name(),
            "google.protobuf.Timestamp");

  // v1 answers the same way (buf curl asks v1 first).
  auto v1 = grpc::reflection::v1::ServerReflection::NewStub(channel_);
  grpc::ClientContext ctx;
  auto rw = v1->ServerReflectionInfo(&ctx);
  grpc::reflection::v1::ServerReflectionRequest req;
  req.set_list_services("");
  ASSERT_TRUE(rw->Write(req));
  grpc::reflection::v1::ServerReflectionResponse resp;
  ASSERT_TRUE(rw->Read(&resp));
  EXPECT_EQ(resp.list_services_response().service_size(), 4);
}

TEST_F(StreamLimitsTest, AStreamIdlePastItsLimitIsEnded) {
  server::ServerOptions o = server::PlaintextOptions("127.0.0.1:0", 4);
  o.reflection.idle_timeout = absl::Milliseconds(300);
  Start(o);
  grpc::ClientContext ctx;
  auto rw = stub_->ServerReflectionInfo(&ctx);
  refl::ServerReflectionRequest req;
  req.set_list_services("");
  refl::ServerReflectionResponse resp;
  ASSERT_TRUE(rw->Write(req));
  ASSERT_TRUE(rw->Read(&resp));
  const auto idle_from = absl::Now();
  EXPECT_FALSE(rw->Read(&resp));  // blocks until the server ends the stream
  EXPECT_GE(absl::Now() - idle_from, absl::Milliseconds(250));
  const grpc::Status status = rw->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(status.error_message(), "reflection stream idle for 300ms; open a new one");
}

TEST_F(StreamLimitsTest, StreamsBeyondTheCapAreRefusedUntilOneCloses) {
  server::ServerOptions o = server::PlaintextOptions("127.0.0.1:0", 4);
  o.reflection.max_streams = 2;
  Start(o);
  refl::ServerReflectionRequest req;
  req.set_list_services("");
  refl::ServerReflectionResponse resp;
  grpc::ClientContext c1, c2, c3;
  auto s1 = stub_->ServerReflectionInfo(&c1);
  auto s2 = stub_->ServerReflectionInfo(&c2);
  ASSERT_TRUE(s1->Write(req) && s1->Read(&resp));
  ASSERT_TRUE(s2->Write(req) && s2->Read(&resp));
  auto s3 = stub_->ServerReflectionInfo(&c3);
  s3->Write(req);
  EXPECT_FALSE(s3->Read(&resp));
  const grpc::Status refused = s3->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(refused.error_message(), "too many reflection streams open (2)");

  s1->WritesDone();
  EXPECT_TRUE(s1->Finish().ok());
  // The slot is free once the server has seen the stream end.
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        grpc::ClientContext c4;
        auto s4 = stub_->ServerReflectionInfo(&c4);
        refl::ServerReflectionResponse r;
        const bool ok = s4->Write(req) && s4->Read(&r);
        s4->WritesDone();
        s4->Finish();
        return ok;
      },
      std::chrono::seconds(5)));
}

TEST_F(StreamLimitsTest, AConnectionHoldsAtMostItsStreamLimit) {
  server::ServerOptions o = server::PlaintextOptions("127.0.0.1:0", 4);
  o.connections.max_streams_per_connection = 2;
  Start(o);
  refl::ServerReflectionRequest req;
  req.set_list_services("");
  refl::ServerReflectionResponse resp;
  grpc::ClientContext c1, c2, c3;
  auto s1 = stub_->ServerReflectionInfo(&c1);
  auto s2 = stub_->ServerReflectionInfo(&c2);
  ASSERT_TRUE(s1->Write(req) && s1->Read(&resp));
  ASSERT_TRUE(s2->Write(req) && s2->Read(&resp));
  // A third stream on the same connection waits for a free slot.
  c3.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  auto s3 = stub_->ServerReflectionInfo(&c3);
  s3->Write(req);
  EXPECT_FALSE(s3->Read(&resp));
  EXPECT_EQ(s3->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // Another connection is not held up by this one.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto other = refl::ServerReflection::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", server_->port()), grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext c4;
  auto s4 = other->ServerReflectionInfo(&c4);
  EXPECT_TRUE(s4->Write(req) && s4->Read(&resp));
  s4->WritesDone();
  EXPECT_TRUE(s4->Finish().ok());
}

// Health Watch needs no token, so its streams are everyone's: past
// --health-max-watches a listener refuses more (counted) until one ends, and
// a service name no service has (over 256 bytes) is refused;
// watchers see every change, and a shutdown ends their streams at once.
// (Before: gRPC's default health service kept every Watch, on any number of
// connections.)
TEST_F(StreamLimitsTest, HealthWatchesPastTheListenersCapAreRefusedUntilOneEnds) {
  server::ServerOptions o = server::PlaintextOptions("127.0.0.1:0", 4);
  o.max_health_watches = 3;
  Start(o);
  using grpc::health::v1::HealthCheckRequest;
  using grpc::health::v1::HealthCheckResponse;
  auto health = grpc::health::v1::Health::NewStub(channel_);
  HealthCheckRequest req;
  req.set_service("ulticode.admin.v1.AdminService");
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<HealthCheckResponse>>> watches;
  auto open = [&] {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    watches.push_back(health->Watch(contexts.back().get(), req));
    HealthCheckResponse first;
    return watches.back()->Read(&first) ? first.status() : HealthCheckResponse::UNKNOWN;
  };
  {
    grpc::ClientContext ctx;
    HealthCheckRequest long_name;
    long_name.set_service(std::string(300, 's'));
    auto refused = health->Watch(&ctx, long_name);
    HealthCheckResponse none;
    EXPECT_FALSE(refused->Read(&none));
    EXPECT_EQ(refused->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(open(), HealthCheckResponse::SERVING) << i;
  EXPECT_EQ(open(), HealthCheckResponse::UNKNOWN) << "a fourth watch was served";
  const grpc::Status refused = watches.back()->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("--health-max-watches"), std::string::npos);
  watches.pop_back();
  contexts.pop_back();
  EXPECT_EQ(testing::MetricValue(testing::MetricText(metrics_->registry()),
                                 "ulticode_health_watches_refused_total{listener=\"grpc\"}"),
            1);

  // One ends: another is served.
  contexts[0]->TryCancel();
  EXPECT_EQ(watches[0]->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitForWatch(open, watches, contexts));

  // A change reaches every watcher; a shutdown ends them promptly.
  server_->SetServing(false);
  for (size_t i = 1; i < watches.size(); ++i) {
    HealthCheckResponse next;
    ASSERT_TRUE(watches[i]->Read(&next)) << i;
    EXPECT_EQ(next.status(), HealthCheckResponse::NOT_SERVING);
  }
  const absl::Time start = absl::Now();
  server_->Shutdown(absl::Seconds(30));
  server_.reset();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "the watches held the shutdown";
  for (size_t i = 1; i < watches.size(); ++i) (void)watches[i]->Finish();

  grpc::ClientContext check;
  HealthCheckResponse unused;
  EXPECT_FALSE(health->Check(&check, req, &unused).ok()) << "the server is gone";
}

TEST_F(StreamLimitsTest, AnIdleConnectionIsClosed) {
  server::ServerOptions o = server::PlaintextOptions("127.0.0.1:0", 4);
  o.connections.idle = absl::Milliseconds(300);
  Start(o);
  ASSERT_TRUE(
      channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5)));
  // GOAWAY from the server takes the channel out of READY.
  EXPECT_TRUE(testing::WaitFor([&] { return channel_->GetState(false) != GRPC_CHANNEL_READY; },
                               std::chrono::seconds(5)));
}

}  // namespace
}  // namespace ulticode
