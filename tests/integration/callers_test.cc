// Verified callers against a real gRPC server (Auth, in process, with the
// JWT resolver and its access table): every refusal is UNAUTHENTICATED with a
// message naming the problem and never the token; a missing role is
// PERMISSION_DENIED naming the role, for every method of every service; the
// JWKS file is re-read when it changes; the actor is the token's subject.
#include <future>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "admin/operations/operations_service.h"
#include "admin/query/audit_query_service.h"
#include "app/app_service.h"
#include "auth/auth_service.h"
#include "auth/migrations.h"
#include "common/jwt/token_cache.h"
#include "common/metrics/metrics.h"
#include "common/server/grpc_server.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "owner/operations/operations_service.h"
#include "tests/support/keys.h"
#include "tests/support/owner_service_fixture.h"
#include "tests/support/process.h"
#include "tests/support/tokens.h"

namespace ulticode {
namespace {

using testing::SharedTestTokens;
using testing::TokenSpec;

class CallersTest : public testing::OwnerServiceTest<auth::AuthServiceImpl, auth::v1::AuthService> {
 protected:
  void SetUp() override {
    StartOwner(auth::Migrations(), "ulticode.auth.v1.AuthService", "callerstest",
               auth::AccessRules());
  }

  // CreateUser with `authorization` values (none when empty).
  grpc::Status Create(const std::vector<std::string>& authorization,
                      const std::string& name = "zoe") {
    grpc::ClientContext ctx;
    for (const auto& a : authorization) ctx.AddMetadata("authorization", a);
    auth::v1::CreateUserRequest req;
    req.set_username(name);
    req.set_email(name + "@example.com");
    auth::v1::CreateUserResponse resp;
    return stub_->CreateUser(&ctx, req, &resp);
  }
  grpc::Status CreateWith(const TokenSpec& spec) {
    return Create({"Bearer " + SharedTestTokens().Mint(spec)});
  }
};

TEST_F(CallersTest, EveryBadCredentialIsUnauthenticatedNamingTheProblem) {
  const std::string good = SharedTestTokens().Mint("alice");
  std::vector<std::string> parts = absl::StrSplit(good, '.');
  std::string tampered_payload;
  absl::WebSafeBase64Unescape(parts[1], &tampered_payload);
  tampered_payload.replace(tampered_payload.find("alice"), 5, "admin");
  const std::string tampered =
      absl::StrCat(parts[0], ".", absl::WebSafeBase64Escape(tampered_payload), ".", parts[2]);
  auto spec = [](auto change) {
    TokenSpec s;
    change(s);
    return "Bearer " + SharedTestTokens().Mint(s);
  };
  // An HS256 token whose "secret" is a public key: algorithm confusion.
  const std::string hs256 =
      absl::StrCat(absl::WebSafeBase64Escape(R"({"alg":"HS256","kid":"test-EdDSA"})"), ".",
                   parts[1], ".", absl::WebSafeBase64Escape("mac"));
  const std::string none = absl::StrCat(
      absl::WebSafeBase64Escape(R"({"alg":"none","kid":"test-EdDSA"})"), ".", parts[1], ".");
  struct Case {
    std::vector<std::string> authorization;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{}, "missing \"authorization: Bearer <token>\""},
      {{"Basic YWxpY2U6cHc="}, "is not \"Bearer <token>\""},
      {{"Bearer"}, "is not \"Bearer <token>\""},
      {{"Bearer abc"}, "not a compact JWS"},
      {{"Bearer a.b!.c"}, "not base64url"},
      {{spec([](TokenSpec& s) { s.expires_in = -absl::Minutes(5); })}, "expired at"},
      {{spec([](TokenSpec& s) { s.not_before = absl::Minutes(5); })}, "not valid before"},
      {{spec([](TokenSpec& s) { s.issuer = "evil"; })}, "wrong issuer"},
      {{spec([](TokenSpec& s) { s.audience = "elsewhere"; })}, "wrong audience"},
      {{spec([](TokenSpec& s) { s.kid = "gone"; })}, "unknown key id \"gone\""},
      {{spec([](TokenSpec& s) { s.kid = SharedTestTokens().Kid("RS256"); })},
       "is for RS256, not EdDSA"},
      {{"Bearer " + tampered}, "bad signature"},
      {{"Bearer " + hs256}, "algorithm \"HS256\" is not accepted"},
      {{"Bearer " + none}, "algorithm \"none\" is not accepted"},
      {{spec([](TokenSpec& s) { s.subject = ""; })}, "\"sub\" claim"},
      {{"Bearer " + good, "Bearer " + good}, "\"authorization\" was sent 2 times"},
  };
  for (const Case& c : cases) {
    grpc::Status s = Create(c.authorization);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << c.message;
    EXPECT_NE(s.error_message().find(c.message), std::string::npos)
        << "want \"" << c.message << "\", got \"" << s.error_message() << "\"";
    for (const std::string& a : c.authorization) {
      if (a.size() > 20) {
        EXPECT_EQ(s.error_message().find(a.substr(7, 20)), std::string::npos) << "token echoed";
      }
    }
  }
  EXPECT_EQ(OutboxRows(), 0);
  // A clock a little behind the issuer's is tolerated (60 s skew).
  TokenSpec early;
  early.not_before = absl::Seconds(30);
  EXPECT_TRUE(CreateWith(early).ok());
}

TEST_F(CallersTest, Es256AndRs256TokensAreAcceptedAndTheSubjectIsTheActor) {
  for (const char* alg : {"EdDSA", "ES256", "RS256"}) {
    TokenSpec s;
    s.alg = alg;
    s.subject = absl::StrCat("user-", alg);
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + SharedTestTokens().Mint(s));
    auth::v1::CreateUserRequest req;
    req.set_username(absl::AsciiStrToLower(absl::StrCat("u", alg)));
    req.set_email(absl::StrCat("u", alg, "@example.com"));
    auth::v1::CreateUserResponse resp;
    grpc::Status st = stub_->CreateUser(&ctx, req, &resp);
    ASSERT_TRUE(st.ok()) << alg << ": " << st.error_message();
    EXPECT_EQ(Event(resp.event_id()).record().actor(), s.subject) << alg;
  }
}

TEST_F(CallersTest, KeysRotateWithoutRestart) {
  const auto& tokens = SharedTestTokens();
  TokenSpec es;
  es.alg = "ES256";
  // Only the ES256 key is published: EdDSA tokens are refused at once.
  tokens.WriteJwks({tokens.Kid("ES256")});
  EXPECT_EQ(Create({tokens.Bearer("alice")}, "rot1").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(CreateWith(es).ok());
  // The EdDSA key comes back: accepted again, no restart.
  tokens.WriteJwks();
  EXPECT_TRUE(Create({tokens.Bearer("alice")}, "rot2").ok());
}

TEST_F(CallersTest, ARemovedKeyRefusesATokenItAcceptedBefore) {
  const auto& tokens = SharedTestTokens();
  const std::string bearer = tokens.Bearer("alice");
  ASSERT_TRUE(Create({bearer}, "seen1").ok());  // verified once: remembered
  tokens.WriteJwks({tokens.Kid("ES256")});      // the EdDSA key is withdrawn
  EXPECT_EQ(Create({bearer}, "seen2").error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << "a reloaded key set re-verifies every token";
  tokens.WriteJwks();
}

// The verified-token cache itself, with explicit clocks.
TEST(VerifiedTokensTest, ServesOnlyTheSameTokenUnderTheSameKeysUntilItExpires) {
  const auto& tokens = SharedTestTokens();
  tokens.WriteJwks();
  auto keys = jwt::Jwks::FromFile(tokens.jwks_file());
  ASSERT_TRUE(keys.ok()) << keys.status();
  auto current = std::make_shared<const jwt::Jwks>(*std::move(keys));
  const jwt::VerifyOptions options{testing::kTestIssuer, testing::kTestAudience, absl::Seconds(5)};
  TokenSpec spec;
  spec.expires_in = absl::Minutes(10);
  const std::string token = tokens.Mint(spec);
  const absl::Time now = absl::Now();
  jwt::VerifiedTokens cache(2);

  auto first = cache.Verify(token, current, options, now);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(cache.Verify(token, current, options, now + absl::Minutes(5)).ok());
  // Past exp + skew the cached entry is not used: jwt::Verify answers.
  auto late = cache.Verify(token, current, options, first->expires_at + absl::Seconds(5));
  ASSERT_FALSE(late.ok());
  EXPECT_TRUE(absl::StrContains(late.status().message(), "expired")) << late.status();
  // A token whose signature differs is another string: verified, refused.
  std::string forged = token;
  char& c = forged[forged.size() - 10];
  c = c == 'A' ? 'B' : 'A';
  EXPECT_FALSE(cache.Verify(forged, current, options, now).ok());
  // Another key set, even one parsed from the same file, re-verifies; without
  // the signing key the cached token is refused.
  tokens.WriteJwks({tokens.Kid("ES256")});
  auto without = jwt::Jwks::FromFile(tokens.jwks_file());
  tokens.WriteJwks();
  ASSERT_TRUE(without.ok());
  auto rotated = std::make_shared<const jwt::Jwks>(*std::move(without));
  EXPECT_FALSE(cache.Verify(token, rotated, options, now).ok());
  // Bounded: more tokens than the capacity still verify (the cache starts over).
  for (int i = 0; i < 5; ++i) {
    TokenSpec other;
    other.subject = absl::StrCat("user", i);
    EXPECT_TRUE(cache.Verify(tokens.Mint(other), current, options, now).ok());
  }
}

TEST_F(CallersTest, AMissingRoleIsPermissionDeniedNamingTheRole) {
  TokenSpec reader;
  reader.roles = {"auth.reader"};
  grpc::Status s = CreateWith(reader);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(), "CreateUser requires the role \"auth.admin\"");
  EXPECT_EQ(OutboxRows(), 0);
}

// Every method of every service, on real servers, called with every role but
// the one it needs, is refused with PERMISSION_DENIED naming that role; with
// only that role it gets past the check. The table holds a rule for each
// method of the service's descriptor and nothing else, so a new RPC without
// a rule fails here.
TEST(AccessRulesTest, EveryMethodOfEveryServiceNeedsItsRole) {
  const auto& tokens = SharedTestTokens();
  server::BearerTokenResolver resolver(tokens.jwks(),
                                       {testing::kTestIssuer, testing::kTestAudience});
  server::Authorizer auth_authz(resolver, auth::AccessRules());
  server::Authorizer app_authz(resolver, app::AccessRules());
  server::Authorizer admin_authz(resolver, admin::query::AccessRules());
  server::Authorizer outbox_ops_authz(resolver, operations::AccessRules());
  server::Authorizer admin_ops_authz(resolver, admin::operations::AccessRules());
  // No database behind them: the check comes before any work.
  pg::PoolOptions nowhere;
  nowhere.connect.conninfo = "host=127.0.0.1 port=1 dbname=none";
  nowhere.connect.connect_timeout = absl::Seconds(1);
  pg::Pool pool(nowhere);
  const crypto::SigningKey& signer = testing::SharedTestKeys().auth();
  auto metrics = metrics::Metrics::Unexposed("rules");
  server::CallExecutor calls({.threads = 2, .max_calls = 16}, metrics->registry());
  auth::AuthServiceImpl auth_service(calls, pool, auth_authz, signer);
  app::AppServiceImpl app_service(calls, pool, app_authz, signer);
  admin::watch::WatchHub watches({}, metrics->registry());  // never started: refusals only
  admin::query::AuditQueryService admin_service(pool, admin_authz, watches, metrics->registry(),
                                                {});
  operations::OutboxOperationsService outbox_ops(audit::v1::OWNER_AUTH, pool, outbox_ops_authz,
                                                 signer, {}, "");
  admin::operations::AdminOperationsService admin_ops(pool, admin_ops_authz, {});
  server::GrpcServer grpc_server(server::PlaintextOptions("127.0.0.1:0", 8), metrics->registry());
  grpc_server.AddService(&auth_service, "ulticode.auth.v1.AuthService");
  grpc_server.AddService(&app_service, "ulticode.app.v1.AppService");
  grpc_server.AddService(&admin_service, "ulticode.admin.v1.AdminService");
  grpc_server.AddService(&outbox_ops, operations::kServiceName);
  grpc_server.AddService(&admin_ops, admin::operations::kServiceName);
  ASSERT_TRUE(grpc_server.Start().ok());
  grpc::GenericStub stub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", grpc_server.port()),
                                             grpc::InsecureChannelCredentials()));
  auto call = [&](const std::string& path, const std::vector<std::string>& roles) {
    TokenSpec spec;
    spec.roles = roles;
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + tokens.Mint(spec));
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Slice empty_slice("");
    grpc::ByteBuffer request(&empty_slice, 1), response;  // an empty message
    std::promise<grpc::Status> done;
    stub.UnaryCall(&ctx, path, grpc::StubOptions(), &request, &response,
                   [&](grpc::Status s) { done.set_value(std::move(s)); });
    return done.get_future().get();
  };
  const std::vector<std::pair<std::string, const server::AccessTable*>> all = {
      {"ulticode.auth.v1.AuthService", &auth::AccessRules()},
      {"ulticode.app.v1.AppService", &app::AccessRules()},
      {"ulticode.admin.v1.AdminService", &admin::query::AccessRules()},
      {operations::kServiceName, &operations::AccessRules()},
      {admin::operations::kServiceName, &admin::operations::AccessRules()}};
  int methods = 0;
  for (const auto& [name, rules] : all) {
    const auto* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(name);
    ASSERT_NE(service, nullptr) << name;
    EXPECT_EQ(rules->size(), static_cast<size_t>(service->method_count()))
        << name << ": a rule per method, and no stale rules";
    for (int i = 0; i < service->method_count(); ++i, ++methods) {
      const std::string method = service->method(i)->name();
      const std::string path = absl::StrCat("/", name, "/", method);
      auto rule = rules->find(method);
      ASSERT_NE(rule, rules->end()) << path << " has no access rule";
      std::vector<std::string> others;
      for (const auto& r : testing::AllRoles()) {
        if (r != rule->second) others.push_back(r);
      }
      const grpc::Status denied = call(path, others);
      EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED) << path;
      EXPECT_EQ(denied.error_message(),
                absl::StrCat(method, " requires the role \"", rule->second, "\""))
          << path;
      const grpc::Status allowed = call(path, {rule->second});
      EXPECT_NE(allowed.error_code(), grpc::StatusCode::PERMISSION_DENIED) << path;
      EXPECT_NE(allowed.error_code(), grpc::StatusCode::UNAUTHENTICATED) << path;
    }
  }
  EXPECT_EQ(methods, 30);
  grpc_server.Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace ulticode

namespace ulticode {
namespace {

// scripts/dev-token.sh: a token the run-local mesh accepts (its issuer key and
// JWKS made by ulticode_dev_jwt_issuer, as run-local does), valid one hour,
// with the subject and roles given.
TEST(DevTokenTest, MintsATokenTheLocalMeshAccepts) {
  char tmpl[] = "/tmp/ulticode-devtoken-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string state = tmpl;
  ASSERT_EQ(
      testing::RunServersSh(absl::StrCat("mkdir -p ", state, "/secrets && ulticode_dev_jwt_issuer ",
                                         state, "/secrets"))
          .exit_code,
      0);
  auto r = testing::RunCommand(absl::StrCat("ULTICODE_STATE_DIR=", state, " ", testing::SourceDir(),
                                            "/scripts/dev-token.sh alice auth.admin app.reader"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string token(absl::StripAsciiWhitespace(r.output));
  auto jwks = jwt::Jwks::FromFile(state + "/secrets/jwks.json");
  ASSERT_TRUE(jwks.ok()) << jwks.status();
  // For the services its roles are for, and no other.
  for (const char* audience : {"ulticode-auth", "ulticode-app"}) {
    EXPECT_TRUE(jwt::Verify(token, *jwks, {"ulticode-dev", audience}, absl::Now()).ok())
        << audience;
  }
  EXPECT_FALSE(jwt::Verify(token, *jwks, {"ulticode-dev", "ulticode-admin"}, absl::Now()).ok());
  // An auditor reads Admin's log and asks each owner what it witnessed.
  auto auditor =
      testing::RunCommand(absl::StrCat("ULTICODE_STATE_DIR=", state, " ", testing::SourceDir(),
                                       "/scripts/dev-token.sh auditor audit.reader"));
  ASSERT_EQ(auditor.exit_code, 0) << auditor.output;
  for (const char* audience : {"ulticode-auth", "ulticode-app", "ulticode-admin"}) {
    EXPECT_TRUE(jwt::Verify(std::string(absl::StripAsciiWhitespace(auditor.output)), *jwks,
                            {"ulticode-dev", audience}, absl::Now())
                    .ok())
        << audience;
  }
  auto claims = jwt::Verify(token, *jwks, {"ulticode-dev", "ulticode-auth"}, absl::Now());
  ASSERT_TRUE(claims.ok()) << claims.status();
  EXPECT_EQ(claims->subject, "alice");
  EXPECT_EQ(claims->roles, (std::vector<std::string>{"auth.admin", "app.reader"}));
  EXPECT_NEAR(absl::ToDoubleSeconds(claims->expires_at - absl::Now()), 3600, 10);
  auto bad =
      testing::RunCommand(absl::StrCat("ULTICODE_STATE_DIR=", state, " ", testing::SourceDir(),
                                       "/scripts/dev-token.sh 'bad subject'"));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  testing::RunCommand("rm -rf " + state);
}

}  // namespace
}  // namespace ulticode
