// Auth's RPCs over real gRPC against a real PostgreSQL: atomicity of the
// business change and its outbox row, contents of every event, no-ops,
// idempotency keys, validation.
#include "auth/auth_service.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "auth/migrations.h"
#include "common/audit/event.h"
#include "common/metrics/metrics.h"
#include "common/migrations/migrations.h"
#include "common/server/error_details.h"
#include "common/server/grpc_server.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "owner/outbox/outbox_store.h"
#include "tests/support/owner_service_fixture.h"
#include "tests/support/test_env.h"

namespace ulticode::auth {
namespace {

using google::protobuf::util::TimeUtil;

class AuthServiceTest
    : public ::ulticode::testing::OwnerServiceTest<AuthServiceImpl, v1::AuthService> {
 protected:
  void SetUp() override {
    StartOwner(Migrations(), "ulticode.auth.v1.AuthService", "authtest", AccessRules());
  }
  static std::string Str(const google::protobuf::Struct& s, const std::string& k) {
    auto it = s.fields().find(k);
    return it == s.fields().end() ? "<absent>" : it->second.string_value();
  }
  static double Num(const google::protobuf::Struct& s, const std::string& k) {
    auto it = s.fields().find(k);
    return it == s.fields().end() ? -1 : it->second.number_value();
  }

  v1::User CreateUser(const std::string& name) {
    v1::CreateUserRequest req;
    req.set_username(name);
    req.set_email(name + "@example.com");
    v1::CreateUserResponse resp;
    auto ctx = Ctx();
    EXPECT_TRUE(stub_->CreateUser(ctx.get(), req, &resp).ok());
    return resp.user();
  }

  void ExpectEnvelope(const audit::AuditEvent& e, const std::string& event_id,
                      const std::string& type, const std::string& action,
                      const std::string& entity_type, const std::string& entity_id,
                      const std::string& request_id) {
    EXPECT_TRUE(audit::Validate(e).ok()) << audit::Validate(e);
    EXPECT_EQ(e.event_id(), event_id);
    EXPECT_EQ(e.record().audit_id(), event_id);
    EXPECT_EQ(e.owner(), audit::v1::OWNER_AUTH);
    EXPECT_EQ(e.event_type(), type);
    // As built: Event() put its personal values back.
    EXPECT_EQ(e.schema_version(), audit::kEmbeddedPersonalDataSchemaVersion);
    EXPECT_GT(e.occurred_at().seconds(), 1'700'000'000);
    EXPECT_EQ(e.record().actor(), "alice");
    EXPECT_EQ(e.record().action(), action);
    EXPECT_EQ(e.record().entity_type(), entity_type);
    EXPECT_EQ(e.record().entity_id(), entity_id);
    EXPECT_EQ(e.record().client_ip(), "127.0.0.1");
    EXPECT_NE(e.record().user_agent().find("grpc-c++"), std::string::npos);
    EXPECT_EQ(e.record().request_id(), request_id);
  }
};

TEST_F(AuthServiceTest, EveryMutatingRpcWritesExactlyOneOutboxRowWithTheRightContents) {
  v1::CreateUserRequest create;
  create.set_username("bob");
  create.set_email("bob@example.com");
  create.set_display_name("Bob B");
  create.set_request_id(::ulticode::testing::RequestIdFor("req-create-bob"));
  v1::CreateUserResponse created;
  ASSERT_TRUE(stub_->CreateUser(Ctx().get(), create, &created).ok());
  ASSERT_TRUE(created.changed());
  EXPECT_EQ(OutboxRows(), 1);
  const std::string uid = created.user().user_id();
  auto e = Event(created.event_id());
  ExpectEnvelope(e, created.event_id(), "auth.user.created", "create_user", "user", uid,
                 ::ulticode::testing::RequestIdFor("req-create-bob"));
  EXPECT_EQ(e.record().subject(), uid);
  EXPECT_FALSE(e.record().has_old_value());
  EXPECT_EQ(Str(e.record().new_value(), "username"), "bob");
  EXPECT_EQ(Str(e.record().new_value(), "email"), "bob@example.com");
  EXPECT_EQ(Str(e.record().new_value(), "display_name"), "Bob B");
  EXPECT_EQ(Str(e.record().new_value(), "status"), "ACTIVE");

  v1::AssignRoleRequest assign;
  assign.set_user_id(uid);
  assign.set_role("judge");
  v1::AssignRoleResponse assigned;
  ASSERT_TRUE(stub_->AssignRole(Ctx().get(), assign, &assigned).ok());
  EXPECT_EQ(OutboxRows(), 2);
  e = Event(assigned.event_id());
  ExpectEnvelope(e, assigned.event_id(), "auth.role.assigned", "assign_role", "user_role",
                 uid + "/judge", "");
  EXPECT_EQ(e.record().old_value().fields().at("roles").list_value().values_size(), 0);
  EXPECT_EQ(e.record().new_value().fields().at("roles").list_value().values(0).string_value(),
            "judge");
  EXPECT_EQ(Num(e.record().old_value(), "authz_version"), 1);
  EXPECT_EQ(Num(e.record().new_value(), "authz_version"), 2);
  EXPECT_EQ(assigned.authz_version(), 2);

  v1::RevokeRoleRequest revoke;
  revoke.set_user_id(uid);
  revoke.set_role("judge");
  v1::RevokeRoleResponse revoked;
  ASSERT_TRUE(stub_->RevokeRole(Ctx().get(), revoke, &revoked).ok());
  EXPECT_EQ(OutboxRows(), 3);
  e = Event(revoked.event_id());
  ExpectEnvelope(e, revoked.event_id(), "auth.role.revoked", "revoke_role", "user_role",
                 uid + "/judge", "");
  EXPECT_EQ(e.record().new_value().fields().at("roles").list_value().values_size(), 0);
  EXPECT_EQ(Num(e.record().new_value(), "authz_version"), 3);

  v1::DisableUserRequest disable;
  disable.set_user_id(uid);
  disable.set_reason("left the team");
  v1::DisableUserResponse disabled;
  ASSERT_TRUE(stub_->DisableUser(Ctx().get(), disable, &disabled).ok());
  EXPECT_EQ(OutboxRows(), 4);
  e = Event(disabled.event_id());
  ExpectEnvelope(e, disabled.event_id(), "auth.user.disabled", "disable_user", "user", uid, "");
  EXPECT_EQ(Str(e.record().old_value(), "status"), "ACTIVE");
  EXPECT_EQ(Str(e.record().new_value(), "status"), "DISABLED");
  EXPECT_EQ(Str(e.record().new_value(), "reason"), "left the team");

  v1::UpdateLoginPolicyRequest policy;
  for (const char* path :
       {"min_password_length", "lockout_threshold", "mfa_required", "session_lifetime"}) {
    policy.mutable_update_mask()->add_paths(path);
  }
  policy.mutable_login_policy()->set_min_password_length(16);
  policy.mutable_login_policy()->set_lockout_threshold(3);
  policy.mutable_login_policy()->set_mfa_required(true);
  *policy.mutable_login_policy()->mutable_session_lifetime() = TimeUtil::SecondsToDuration(3600);
  v1::UpdateLoginPolicyResponse updated;
  ASSERT_TRUE(stub_->UpdateLoginPolicy(Ctx().get(), policy, &updated).ok());
  EXPECT_EQ(OutboxRows(), 5);
  e = Event(updated.event_id());
  ExpectEnvelope(e, updated.event_id(), "auth.login_policy.updated", "update_login_policy",
                 "login_policy", "default", "");
  EXPECT_EQ(Num(e.record().old_value(), "min_password_length"), 12);
  EXPECT_EQ(Num(e.record().new_value(), "min_password_length"), 16);
  EXPECT_EQ(e.record().new_value().fields().at("mfa_required").bool_value(), true);
  EXPECT_EQ(Num(e.record().new_value(), "version"), 2);
}

TEST_F(AuthServiceTest, FaultAfterOutboxInsertBeforeCommitLeavesNeitherRow) {
  fault_ = [](absl::string_view) { return absl::InternalError("injected fault before COMMIT"); };
  v1::CreateUserRequest req;
  req.set_username("carol");
  req.set_email("carol@example.com");
  v1::CreateUserResponse resp;
  grpc::Status s = stub_->CreateUser(Ctx().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(Scalar("SELECT count(*) FROM users"), 0);
  EXPECT_EQ(OutboxRows(), 0);
}

TEST_F(AuthServiceTest, BusinessErrorsLeaveNoOutboxRow) {
  const v1::User u = CreateUser("dave");
  ASSERT_EQ(OutboxRows(), 1);
  v1::CreateUserRequest dup;
  dup.set_username("dave");
  dup.set_email("other@example.com");
  v1::CreateUserResponse r1;
  grpc::Status s = stub_->CreateUser(Ctx().get(), dup, &r1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_NE(s.error_message().find("username"), std::string::npos);
  dup.set_username("dave2");
  dup.set_email("dave@example.com");
  s = stub_->CreateUser(Ctx().get(), dup, &r1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_NE(s.error_message().find("email"), std::string::npos);

  v1::AssignRoleRequest bad_role;
  bad_role.set_user_id(u.user_id());
  bad_role.set_role("wizard");
  v1::AssignRoleResponse r2;
  EXPECT_EQ(stub_->AssignRole(Ctx().get(), bad_role, &r2).error_code(),
            grpc::StatusCode::NOT_FOUND);
  bad_role.set_user_id("0190a8e4-7b5c-7d3e-8f00-0123456789ab");
  bad_role.set_role("judge");
  EXPECT_EQ(stub_->AssignRole(Ctx().get(), bad_role, &r2).error_code(),
            grpc::StatusCode::NOT_FOUND);

  v1::DisableUserRequest disable;
  disable.set_user_id(u.user_id());
  disable.set_reason("x");
  v1::DisableUserResponse r3;
  ASSERT_TRUE(stub_->DisableUser(Ctx().get(), disable, &r3).ok());
  bad_role.set_user_id(u.user_id());
  EXPECT_EQ(stub_->AssignRole(Ctx().get(), bad_role, &r2).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(OutboxRows(), 2);
  EXPECT_EQ(Scalar("SELECT count(*) FROM users"), 1);
}

TEST_F(AuthServiceTest, NoOpChangesSucceedAndWriteNoEvent) {
  const v1::User u = CreateUser("erin");
  v1::AssignRoleRequest assign;
  assign.set_user_id(u.user_id());
  assign.set_role("contestant");
  v1::AssignRoleResponse a1, a2;
  ASSERT_TRUE(stub_->AssignRole(Ctx().get(), assign, &a1).ok());
  ASSERT_TRUE(stub_->AssignRole(Ctx().get(), assign, &a2).ok());
  EXPECT_TRUE(a1.changed());
  EXPECT_FALSE(a2.changed());
  EXPECT_TRUE(a2.event_id().empty());
  EXPECT_EQ(a2.authz_version(), a1.authz_version());

  v1::RevokeRoleRequest revoke;
  revoke.set_user_id(u.user_id());
  revoke.set_role("judge");  // never had it
  v1::RevokeRoleResponse r;
  ASSERT_TRUE(stub_->RevokeRole(Ctx().get(), revoke, &r).ok());
  EXPECT_FALSE(r.changed());

  v1::DisableUserRequest disable;
  disable.set_user_id(u.user_id());
  disable.set_reason("x");
  v1::DisableUserResponse d1, d2;
  ASSERT_TRUE(stub_->DisableUser(Ctx().get(), disable, &d1).ok());
  ASSERT_TRUE(stub_->DisableUser(Ctx().get(), disable, &d2).ok());
  EXPECT_FALSE(d2.changed());

  v1::UpdateLoginPolicyRequest same;
  same.mutable_update_mask()->add_paths("min_password_length");
  same.mutable_update_mask()->add_paths("mfa_required");
  same.mutable_login_policy()->set_min_password_length(12);
  same.mutable_login_policy()->set_lockout_threshold(5);
  same.mutable_login_policy()->set_mfa_required(false);
  *same.mutable_login_policy()->mutable_session_lifetime() = TimeUtil::SecondsToDuration(43200);
  v1::UpdateLoginPolicyResponse p;
  ASSERT_TRUE(stub_->UpdateLoginPolicy(Ctx().get(), same, &p).ok());
  EXPECT_FALSE(p.changed());
  EXPECT_EQ(p.login_policy().version(), 1);

  EXPECT_EQ(OutboxRows(), 3);  // create, assign, disable
}

TEST_F(AuthServiceTest, RepeatedRequestIdReturnsTheFirstResultAndChangesNothingMore) {
  v1::CreateUserRequest req;
  req.set_username("frank");
  req.set_email("frank@example.com");
  req.set_request_id(::ulticode::testing::RequestIdFor("idem-1"));
  v1::CreateUserResponse first, second;
  ASSERT_TRUE(stub_->CreateUser(Ctx().get(), req, &first).ok());
  ASSERT_TRUE(stub_->CreateUser(Ctx().get(), req, &second).ok());
  EXPECT_EQ(first.SerializeAsString(), second.SerializeAsString());
  EXPECT_EQ(Scalar("SELECT count(*) FROM users"), 1);
  EXPECT_EQ(OutboxRows(), 1);

  req.set_username("frank2");
  v1::CreateUserResponse third;
  grpc::Status s = stub_->CreateUser(Ctx().get(), req, &third);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("request_id"), std::string::npos);
  EXPECT_EQ(server::ErrorDetails::Of(s).BadField(), "request_id") << s.error_message();

  // Concurrent repeats of one key: one change, one event, same answer.
  v1::AssignRoleRequest assign;
  assign.set_user_id(first.user().user_id());
  assign.set_role("judge");
  assign.set_request_id(::ulticode::testing::RequestIdFor("idem-2"));
  std::vector<std::thread> threads;
  std::vector<std::string> event_ids(6);
  std::vector<bool> ok(6);
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      v1::AssignRoleResponse r;
      ok[i] = stub_->AssignRole(Ctx().get(), assign, &r).ok();
      event_ids[i] = r.event_id();
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 6; ++i) {
    EXPECT_TRUE(ok[i]);
    EXPECT_EQ(event_ids[i], event_ids[0]);
  }
  EXPECT_EQ(OutboxRows(), 2);
  EXPECT_EQ(Scalar("SELECT authz_version FROM users"), 2);
}

TEST_F(AuthServiceTest, RequestIdsAreScopedToTheCallingPrincipal) {
  v1::CreateUserRequest req;
  req.set_username("kate");
  req.set_email("kate@example.com");
  req.set_request_id(::ulticode::testing::RequestIdFor("shared-id"));
  v1::CreateUserResponse alice, mallory;
  ASSERT_TRUE(stub_->CreateUser(Ctx("alice").get(), req, &alice).ok());
  // Another caller with the same id does not get alice's stored response: its
  // request runs for real (and here clashes on the username).
  grpc::Status s = stub_->CreateUser(Ctx("mallory").get(), req, &mallory);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS) << s.error_message();
  EXPECT_TRUE(mallory.event_id().empty());
  EXPECT_EQ(OutboxRows(), 1);
}

TEST_F(AuthServiceTest, InvalidInputGetsInvalidArgumentNamingTheFieldAndWritesNothing) {
  const v1::User u = CreateUser("gina");
  const int64_t rows = OutboxRows();
  auto expect_invalid = [&](grpc::Status s, const std::string& field) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << field << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(field), std::string::npos) << s.error_message();
    EXPECT_EQ(server::ErrorDetails::Of(s).BadField(), field) << s.error_message();
  };
  for (auto [name, email, display, field] :
       std::vector<std::tuple<std::string, std::string, std::string, std::string>>{
           {"", "a@b.co", "", "username"},
           {"ab", "a@b.co", "", "username"},
           {"9abc", "a@b.co", "", "username"},
           {"Abc", "a@b.co", "", "username"},
           {"a b c", "a@b.co", "", "username"},
           {std::string(33, 'a'), "a@b.co", "", "username"},
           {"valid", "", "", "email"},
           {"valid", "no-at-sign", "", "email"},
           {"valid", "a@@b.co", "", "email"},
           {"valid", "a@nodot", "", "email"},
           {"valid", "a@b.co", std::string(129, 'x'), "display_name"},
           {"valid", "a@b.co", "tab\there", "display_name"},
       }) {
    v1::CreateUserRequest req;
    req.set_username(name);
    req.set_email(email);
    req.set_display_name(display);
    v1::CreateUserResponse resp;
    expect_invalid(stub_->CreateUser(Ctx().get(), req, &resp), field);
  }
  v1::CreateUserRequest long_id;
  long_id.set_username("valid");
  long_id.set_email("valid@example.com");
  long_id.set_request_id(std::string(129, 'r'));
  v1::CreateUserResponse resp;
  expect_invalid(stub_->CreateUser(Ctx().get(), long_id, &resp), "request_id");

  v1::DisableUserRequest disable;
  v1::DisableUserResponse dr;
  disable.set_reason("r");
  expect_invalid(stub_->DisableUser(Ctx().get(), disable, &dr), "user_id");
  disable.set_user_id("not-a-uuid");
  expect_invalid(stub_->DisableUser(Ctx().get(), disable, &dr), "user_id");
  disable.set_user_id(u.user_id());
  disable.set_reason("");
  expect_invalid(stub_->DisableUser(Ctx().get(), disable, &dr), "reason");

  v1::AssignRoleRequest assign;
  v1::AssignRoleResponse ar;
  assign.set_user_id(u.user_id());
  expect_invalid(stub_->AssignRole(Ctx().get(), assign, &ar), "role");
  assign.set_role("Judge!");
  expect_invalid(stub_->AssignRole(Ctx().get(), assign, &ar), "role");
  v1::RevokeRoleRequest revoke;
  v1::RevokeRoleResponse rr;
  revoke.set_role("judge");
  expect_invalid(stub_->RevokeRole(Ctx().get(), revoke, &rr), "user_id");

  v1::UpdateLoginPolicyRequest policy;
  v1::UpdateLoginPolicyResponse pr;
  expect_invalid(stub_->UpdateLoginPolicy(Ctx().get(), policy, &pr), "login_policy");
  auto* p = policy.mutable_login_policy();
  p->set_min_password_length(7);
  p->set_lockout_threshold(5);
  *p->mutable_session_lifetime() = TimeUtil::SecondsToDuration(3600);
  // No mask: refused, never "every field" (mfa_required left out would be
  // turned off).
  expect_invalid(stub_->UpdateLoginPolicy(Ctx().get(), policy, &pr), "update_mask");
  policy.mutable_update_mask()->add_paths("min_password_length");
  policy.mutable_update_mask()->add_paths("lockout_threshold");
  policy.mutable_update_mask()->add_paths("session_lifetime");
  expect_invalid(stub_->UpdateLoginPolicy(Ctx().get(), policy, &pr),
                 "login_policy.min_password_length");
  p->set_min_password_length(12);
  p->set_lockout_threshold(0);
  expect_invalid(stub_->UpdateLoginPolicy(Ctx().get(), policy, &pr),
                 "login_policy.lockout_threshold");
  p->set_lockout_threshold(5);
  *p->mutable_session_lifetime() = TimeUtil::SecondsToDuration(59);
  expect_invalid(stub_->UpdateLoginPolicy(Ctx().get(), policy, &pr),
                 "login_policy.session_lifetime");

  EXPECT_EQ(OutboxRows(), rows);
  EXPECT_EQ(Scalar("SELECT count(*) FROM users"), 1);
  EXPECT_EQ(Scalar("SELECT count(*) FROM user_roles"), 0);
  EXPECT_EQ(Scalar("SELECT version FROM login_policy"), 1);
}

TEST_F(AuthServiceTest, CallerWithoutPrincipalIsUnauthenticated) {
  v1::CreateUserRequest req;
  req.set_username("henry");
  req.set_email("henry@example.com");
  v1::CreateUserResponse resp;
  grpc::Status s = stub_->CreateUser(Ctx("").get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(OutboxRows(), 0);
}

TEST_F(AuthServiceTest, ReadRpcsWriteNoEvents) {
  const v1::User u = CreateUser("ivy");
  v1::GetUserRequest get;
  get.set_user_id(u.user_id());
  v1::User got;
  ASSERT_TRUE(stub_->GetUser(Ctx().get(), get, &got).ok());
  EXPECT_EQ(got.username(), "ivy");
  v1::GetUserRolesRequest get_roles;
  get_roles.set_user_id(u.user_id());
  v1::UserRoles roles;
  ASSERT_TRUE(stub_->GetUserRoles(Ctx().get(), get_roles, &roles).ok());
  v1::LoginPolicy policy;
  ASSERT_TRUE(stub_->GetLoginPolicy(Ctx().get(), v1::GetLoginPolicyRequest(), &policy).ok());
  EXPECT_EQ(policy.min_password_length(), 12);
  get.set_user_id("0190a8e4-7b5c-7d3e-8f00-0123456789ab");
  EXPECT_EQ(stub_->GetUser(Ctx().get(), get, &got).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(OutboxRows(), 1);
}

}  // namespace
}  // namespace ulticode::auth
