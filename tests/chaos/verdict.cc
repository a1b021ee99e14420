#include "tests/chaos/verdict.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/crypto/crypto.h"
#include "common/pg/connection.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/support/pg_query.h"
#include "tests/support/test_env.h"
#include "tests/support/tokens.h"

namespace ulticode::chaos {
namespace {

using ::ulticode::testing::QueryInt;
using ::ulticode::testing::Service;
using ::ulticode::testing::WaitFor;

}  // namespace

std::unique_ptr<pg::Connection> Connect(const std::string& dsn) {
  pg::ConnectOptions o;
  o.conninfo = dsn;
  auto c = pg::Connection::Connect(o);
  return c.ok() ? std::move(c).value() : nullptr;
}

std::string Verdict::Summary() const {
  return absl::StrFormat(
      "events=%zu audit_rows=%zu resends=%lld lost=%lld duplicated=%lld orphaned=%lld wrong=%lld "
      "unconfirmed=%lld dead=%lld poison=%lld ok_events=%lld ok_missing=%lld ok_vanished=%lld "
      "missing_numbers=%lld log_verified=%s converge_s=%.1f",
      outbox.size(), logged.size(), static_cast<long long>(resends), static_cast<long long>(lost),
      static_cast<long long>(duplicated), static_cast<long long>(orphaned),
      static_cast<long long>(wrong), static_cast<long long>(unconfirmed),
      static_cast<long long>(dead), static_cast<long long>(poison),
      static_cast<long long>(ok_with_event), static_cast<long long>(ok_missing),
      static_cast<long long>(ok_vanished), static_cast<long long>(missing_numbers),
      log_verified ? "yes" : "NO", converge_s);
}

void Verdict::ExpectClean() const {
  EXPECT_TRUE(quiet) << "no quiescence within 180 s after the faults stopped";
  EXPECT_GT(ok_with_event, 100) << "the load did not get through";
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(duplicated, 0);
  EXPECT_EQ(orphaned, 0);
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(unconfirmed, 0);
  EXPECT_EQ(dead, 0);
  EXPECT_EQ(poison, 0) << "owners only publish valid events";
  EXPECT_EQ(ok_missing, 0);
  EXPECT_EQ(ok_vanished, 0) << "a client was told OK for a change that no longer exists";
  EXPECT_EQ(missing_numbers, 0) << "event numbers reported missing that were never committed";
  EXPECT_TRUE(log_verified) << "the transparency log does not verify: " << log_report;
}

namespace {

// Waits until every audit row is in a signed checkpoint, exports the log
// through the first Admin replica and checks the export with public keys.
void VerifyLog(testing::Mesh& mesh, pg::Connection& admin_db, Verdict& v) {
  const bool signed_all = WaitFor(
      [&] {
        return QueryInt(admin_db, "SELECT count(*) FROM audit_logs") ==
               QueryInt(admin_db, "SELECT coalesce(max(size), 0) FROM log_checkpoints");
      },
      std::chrono::seconds(60));
  EXPECT_TRUE(signed_all) << "the log's checkpoints do not cover every audit row";
  const testing::TestKeys& keys = mesh.keys();
  const std::string dir = keys.dir();
  testing::TokenSpec spec;
  spec.subject = "chaos-auditor";
  spec.roles = {"audit.reader"};
  ASSERT_TRUE(
      crypto::WriteSecretFile(dir + "/chaos-auditor.token", testing::SharedTestTokens().Mint(spec))
          .ok());
  const std::string verify = testing::BinDir() + "/tools/verify/ulticode-verify";
  const auto exported = testing::RunCommand(
      absl::StrCat(verify, " export --admin=127.0.0.1:", mesh.grpc_port(Service::kAdmin, 0),
                   " --token-file=", dir, "/chaos-auditor.token --out=", dir, "/chaos-export"));
  v.log_report = exported.output;
  if (exported.exit_code != 0) return;
  const auto checked = testing::RunCommand(absl::StrCat(
      verify, " check --dir=", dir, "/chaos-export --log-keys-file=", keys.LogVerifierKeyFile(),
      " --owner-keys-file=", keys.public_keys_file(),
      " --witness-keys-file=", keys.WitnessKeysFile()));
  v.log_report += checked.output;
  v.log_verified = checked.exit_code == 0;
}

}  // namespace

void Settle(testing::Mesh& mesh, const std::vector<OkCall>& ok_calls, absl::Time load_end,
            Verdict& v) {
  auto auth_db = Connect(mesh.Dsn(Service::kAuth));
  auto app_db = Connect(mesh.Dsn(Service::kApp));
  auto admin_db = Connect(mesh.Dsn(Service::kAdmin));
  ASSERT_TRUE(auth_db && app_db && admin_db);
  const char* kNotConfirmed = "SELECT count(*) FROM audit_outbox WHERE state <> 'CONFIRMED'";
  v.quiet = WaitFor(
      [&] {
        return QueryInt(*auth_db, kNotConfirmed) == 0 && QueryInt(*app_db, kNotConfirmed) == 0 &&
               QueryInt(*admin_db,
                        "SELECT count(*) FROM consumer_inbox WHERE status IN ('PENDING', "
                        "'PROCESSING')") == 0;
      },
      std::chrono::seconds(180));
  v.converge_s = absl::ToDoubleSeconds(absl::Now() - load_end);

  // Every number committed on an owner examined by Admin's sequence watch
  // (the owners attest the ones never committed first).
  const bool examined = WaitFor(
      [&] {
        for (auto [conn, owner] :
             {std::pair{auth_db.get(), "auth"}, std::pair{app_db.get(), "app"}}) {
          const int64_t highest =
              QueryInt(*conn, "SELECT coalesce(max(owner_sequence), 0) FROM audit_outbox");
          const int64_t through =
              QueryInt(*admin_db, absl::StrCat("SELECT coalesce(max(through), 0) FROM"
                                               " owner_sequence_checked WHERE owner = '",
                                               owner, "'"));
          if (through < highest) return false;
        }
        return true;
      },
      std::chrono::seconds(60));
  EXPECT_TRUE(examined) << "Admin's sequence watch did not catch up";
  v.missing_numbers = QueryInt(*admin_db,
                               "SELECT coalesce(sum(last_missing - first_missing + 1), 0)"
                               " FROM owner_sequence_gaps WHERE resolved_at IS NULL");
  VerifyLog(mesh, *admin_db, v);

  // Checks, directly in the three databases.
  int64_t outbox_duplicates = 0;
  for (auto [conn, owner] : {std::pair{auth_db.get(), audit::v1::OWNER_AUTH},
                             std::pair{app_db.get(), audit::v1::OWNER_APP}}) {
    pg::Statement st{"chaos.outbox", "SELECT event_id::text, state, payload FROM audit_outbox",
                     absl::Seconds(30)};
    auto r = conn->Execute(st);
    ASSERT_TRUE(r.ok()) << r.status();
    for (int i = 0; i < r->rows(); ++i) {
      if (!v.outbox
               .emplace(r->GetString(i, 0), OutboxRow{owner, r->GetString(i, 1), r->GetBytes(i, 2)})
               .second) {
        ++outbox_duplicates;
      }
    }
  }
  // Every business change has its outbox row (same transaction).
  EXPECT_EQ(QueryInt(*auth_db, "SELECT count(*) FROM users"),
            QueryInt(*auth_db,
                     "SELECT count(*) FROM audit_outbox WHERE event_type = 'auth.user.created'"));
  EXPECT_EQ(QueryInt(*app_db, "SELECT count(*) FROM problems"),
            QueryInt(*app_db,
                     "SELECT count(*) FROM audit_outbox WHERE event_type = 'app.problem.created'"));

  pg::Statement logs_st{"chaos.logs",
                        "SELECT event_id::text, owner, actor, action, entity_type, entity_id,"
                        " coalesce(new_value::text, ''), envelope, request_id FROM audit_logs",
                        absl::Seconds(30)};
  auto logs = admin_db->Execute(logs_st);
  ASSERT_TRUE(logs.ok()) << logs.status();
  // What Admin shows for each event: actor, entity id, request id, new_value.
  struct Shown {
    std::string actor, entity_id, request_id;
    google::protobuf::Struct new_value;
  };
  std::map<std::string, Shown> shown;
  v.duplicated = outbox_duplicates;
  for (int i = 0; i < logs->rows(); ++i) {
    const std::string id = logs->GetString(i, 0);
    if (!v.logged.insert(id).second) ++v.duplicated;
    auto it = v.outbox.find(id);
    if (it == v.outbox.end() || audit::OwnerName(it->second.owner) != logs->GetString(i, 1)) {
      ++v.orphaned;
      continue;
    }
    audit::AuditEvent event;
    ASSERT_TRUE(event.ParseFromString(it->second.payload));
    const auto& rec = event.record();
    google::protobuf::Struct new_value;
    const std::string json = logs->GetString(i, 6);
    bool values_match =
        json.empty()
            ? !rec.has_new_value()
            : google::protobuf::util::JsonStringToMessage(json, &new_value).ok() &&
                  google::protobuf::util::MessageDifferencer::Equals(new_value, rec.new_value());
    shown[id] =
        Shown{logs->GetString(i, 2), logs->GetString(i, 5), logs->GetString(i, 8), new_value};
    if (logs->GetString(i, 2) != rec.actor() || logs->GetString(i, 3) != rec.action() ||
        logs->GetString(i, 4) != rec.entity_type() || logs->GetString(i, 5) != rec.entity_id() ||
        !values_match || logs->GetBytes(i, 7) != it->second.payload) {
      if (v.wrong++ == 0) ADD_FAILURE() << "audit row differs from its outbox event " << id;
    }
  }
  // The personal values Admin holds beside its rows (docs/personal-data.md):
  // a created user's names are among them, put back where the client sent
  // them.
  pg::Statement personal_st{"chaos.personal",
                            "SELECT event_id::text, substr(path, 11), value FROM personal_values"
                            " WHERE path LIKE 'new\\_value.%'",
                            absl::Seconds(30)};
  auto personal = admin_db->Execute(personal_st);
  ASSERT_TRUE(personal.ok()) << personal.status();
  for (int i = 0; i < personal->rows(); ++i) {
    auto it = shown.find(personal->GetString(i, 0));
    if (it == shown.end()) continue;
    (*it->second.new_value.mutable_fields())[personal->GetString(i, 1)].set_string_value(
        personal->GetString(i, 2));
  }
  // One request executed twice would leave two events (with different ids)
  // carrying the same request id.
  std::map<std::string, std::string> event_of_request;
  for (const auto& [id, row] : v.outbox) {
    audit::AuditEvent event;
    if (!event.ParseFromString(row.payload) || event.record().request_id().empty()) continue;
    auto [it, fresh] = event_of_request.emplace(event.record().request_id(), id);
    if (!fresh) {
      ++v.duplicated;
      ADD_FAILURE() << "request " << it->first << " produced two events: " << it->second << " and "
                    << id;
    }
  }
  for (const auto& [id, row] : v.outbox) {
    if (!v.logged.contains(id)) {
      if (v.lost++ < 5) {
        pg::Statement inbox_st{"chaos.inbox_row",
                               "SELECT status || ' attempts=' || attempts || ' error=' ||"
                               " coalesce(last_error, '-') || ' received=' || received_at"
                               " FROM consumer_inbox WHERE event_id = $1::uuid"};
        auto in = admin_db->Execute(inbox_st, {pg::Text(id)});
        pg::Statement out_st{"chaos.outbox_row",
                             "SELECT 'attempts=' || attempts || ' resends=' || resends ||"
                             " ' entry=' || coalesce(stream_entry_id, '-') || ' created=' ||"
                             " created_at || ' published=' || coalesce(published_at::text, '-') ||"
                             " ' confirmed=' || coalesce(confirmed_at::text, '-')"
                             " FROM audit_outbox WHERE event_id = $1::uuid"};
        auto out = (row.owner == audit::v1::OWNER_AUTH ? auth_db : app_db)
                       ->Execute(out_st, {pg::Text(id)});
        ADD_FAILURE() << "lost: event " << id << " owner " << audit::OwnerName(row.owner)
                      << " outbox state " << row.state << " "
                      << (out.ok() && out->rows() == 1 ? out->GetString(0, 0) : "?") << "; inbox: "
                      << (in.ok() && in->rows() == 1 ? in->GetString(0, 0) : "absent");
      }
    }
    if (row.state != "CONFIRMED") ++v.unconfirmed;
  }
  v.duplicated +=
      QueryInt(*admin_db, "SELECT count(*) - count(DISTINCT event_id) FROM consumer_inbox");
  v.dead = QueryInt(*admin_db, "SELECT count(*) FROM consumer_inbox WHERE status = 'DEAD'");
  v.poison = QueryInt(*admin_db, "SELECT count(*) FROM poison_events");
  for (const OkCall& call : ok_calls) {
    if (call.event_id.empty()) continue;
    ++v.ok_with_event;
    if (!v.outbox.contains(call.event_id)) ++v.ok_vanished;
    if (!v.logged.contains(call.event_id)) {
      if (v.ok_missing++ < 5) {
        ADD_FAILURE() << "OK call " << call.method << " returned event " << call.event_id
                      << " which has no audit row; in its owner's outbox: "
                      << (v.outbox.contains(call.event_id) ? "yes" : "NO");
      }
      continue;
    }
    // The audit row says what the client did: who, to what, with which value.
    const Shown& s = shown[call.event_id];
    const auto& fields = s.new_value.fields();
    const bool value_ok =
        call.value_key.empty() ||
        (fields.contains(call.value_key) && fields.at(call.value_key).string_value() == call.value);
    if (s.actor != call.principal || s.entity_id != call.entity_id ||
        s.request_id != call.request_id || !value_ok) {
      if (v.wrong++ < 5) {
        ADD_FAILURE() << call.method << " " << call.request_id << ": audit row shows actor "
                      << s.actor << ", entity " << s.entity_id << ", request " << s.request_id;
      }
    }
  }
  v.resends = QueryInt(*auth_db, "SELECT coalesce(sum(resends), 0) FROM audit_outbox") +
              QueryInt(*app_db, "SELECT coalesce(sum(resends), 0) FROM audit_outbox");
}

}  // namespace ulticode::chaos
