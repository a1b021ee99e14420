// Writes the seed corpora of the fuzz targets: corpus_gen <dir> fills
// <dir>/<target>/ with small valid and invalid inputs, built with the same
// encoders and fixed keys the targets decode with (fuzz_support.h). The
// output is deterministic (fixed ids and times; Ed25519 signatures are
// deterministic), so regenerating fuzz/corpus changes nothing unless the
// formats do:
//
//   build/fuzz/corpus_gen fuzz/corpus
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "admin/query/list_token.h"
#include "admin/query/page_token.h"
#include "common/audit/personal.h"
#include "common/seal/seal.h"
#include "common/tlog/cosignature.h"
#include "common/tlog/leaf.h"
#include "common/tlog/note.h"
#include "common/tlog/tiles.h"
#include "common/tlog/witnessing.h"
#include "fuzz/fuzz_support.h"
#include "google/protobuf/util/time_util.h"
#include "ulticode/app/v1/app.pb.h"
#include "ulticode/auth/v1/auth.pb.h"

using namespace ::ulticode;  // NOLINT

namespace {

constexpr char kId1[] = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
constexpr char kId2[] = "01977a3c-5b10-7c2e-9f00-123456789abc";
constexpr char kUserId[] = "0190a1b2-1111-7000-8000-000000000001";

std::string g_root;
int g_files = 0;

void Write(const std::string& target, const std::string& name, const std::string& bytes) {
  const std::string dir = g_root + "/" + target;
  ::mkdir(g_root.c_str(), 0755);
  ::mkdir(dir.c_str(), 0755);
  std::ofstream out(dir + "/" + name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  FUZZ_CHECK(out.good(), dir + "/" + name);
  ++g_files;
}

audit::AuditEvent Event(audit::Owner owner, const std::string& id, absl::Time at) {
  const bool auth = owner == audit::v1::OWNER_AUTH;
  audit::AuditEvent e;
  e.set_event_id(id);
  e.set_owner(owner);
  e.set_event_type(auth ? "auth.user.created" : "app.problem.created");
  e.set_schema_version(audit::kEmbeddedPersonalDataSchemaVersion);
  *e.mutable_occurred_at() =
      google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(at));
  auto* r = e.mutable_record();
  r->set_audit_id(id);
  r->set_actor("0190a1b2-0000-7000-8000-00000000a11c");
  r->set_subject(kUserId);
  r->set_action(auth ? "create_user" : "create_problem");
  r->set_entity_type(auth ? "user" : "problem");
  r->set_entity_id(kUserId);
  r->set_client_ip("203.0.113.7");
  r->set_user_agent("ulticli/1.0");
  r->set_request_id("req-42");
  (*r->mutable_new_value()->mutable_fields())["login"].set_string_value("alice");
  return e;
}

// An event with every kind of value, nested a little.
audit::AuditEvent RichEvent() {
  audit::AuditEvent e = Event(audit::v1::OWNER_APP, kId2, fuzz::Now() - absl::Minutes(3));
  e.set_event_type("app.problem.updated");
  auto* r = e.mutable_record();
  r->set_action("update_problem");
  r->set_trace_id("4bf92f3577b34da6a3ce929d0e0e4736");
  auto& old_fields = *r->mutable_old_value()->mutable_fields();
  old_fields["title"].set_string_value("A + B");
  old_fields["difficulty"].set_number_value(3);
  auto& fields = *r->mutable_new_value()->mutable_fields();
  fields["title"].set_string_value(
      "A + B, \xc3\xa9"
      "dition 2\n\tmulti-line");
  fields["difficulty"].set_number_value(4.5);
  fields["public"].set_bool_value(true);
  fields["deleted_at"].set_null_value(google::protobuf::NULL_VALUE);
  auto* list = fields["tags"].mutable_list_value();
  list->add_values()->set_string_value("math");
  list->add_values()->set_number_value(-1e300);
  auto& inner = *fields["limits"].mutable_struct_value()->mutable_fields();
  inner["time_ms"].set_number_value(1000);
  (*inner["nested"].mutable_struct_value()->mutable_fields())["deep"].set_bool_value(false);
  return e;
}

std::string SealOf(const crypto::SigningKey& signer, const std::string& envelope) {
  auto sealed = seal::SealBundle(signer, {absl::string_view(envelope)});
  FUZZ_CHECK(sealed.ok(), sealed.status().ToString());
  return (*sealed)[0];
}

redis::StreamFields Entry(const audit::AuditEvent& e, const std::string& envelope,
                          const crypto::SigningKey& signer) {
  return {{"envelope", envelope}, {"seal", SealOf(signer, envelope)}, {"key_id", signer.key_id()}};
}

redis::StreamFields Entry(const audit::AuditEvent& e) {
  return Entry(e, audit::Serialize(e), fuzz::Keys().owner(e.owner()));
}

void Set(redis::StreamFields& fields, const std::string& name, const std::string& value) {
  for (auto& [n, v] : fields) {
    if (n == name) v = value;
  }
}

void Drop(redis::StreamFields& fields, const std::string& name) {
  std::erase_if(fields, [&](const auto& f) { return f.first == name; });
}

void EntryValidation() {
  const std::string t = "fuzz_entry_validation";
  const auto& keys = fuzz::Keys();
  const absl::Time at = fuzz::Now() - absl::Seconds(5);
  const audit::AuditEvent auth = Event(audit::v1::OWNER_AUTH, kId1, at);
  const audit::AuditEvent app = Event(audit::v1::OWNER_APP, kId2, at);
  Write(t, "valid_auth", fuzz::EncodeFields(0, Entry(auth)));
  Write(t, "valid_app", fuzz::EncodeFields(1, Entry(app)));
  Write(t, "valid_app_rich", fuzz::EncodeFields(1, Entry(RichEvent())));
  {
    // Schema 2: the personal values beside the envelope, committed to.
    audit::AuditEvent committed = auth;
    (*committed.mutable_record()->mutable_new_value()->mutable_fields())["email"].set_string_value(
        "alice@example.com");
    auto values = audit::CommitPersonalData(committed);
    FUZZ_CHECK(values.ok(), values.status().ToString());
    auto fields = Entry(committed);
    fields.emplace_back(audit::kPersonalField, values->SerializeAsString());
    Write(t, "valid_auth_committed", fuzz::EncodeFields(0, fields));
  }
  Write(t, "valid_auth_tight_limits", fuzz::EncodeFields(4, Entry(auth)));
  Write(t, "deleted", fuzz::EncodeFields(2, Entry(auth)));
  Write(t, "app_entry_on_auth_stream", fuzz::EncodeFields(0, Entry(app)));

  auto f = Entry(auth);
  std::string sealed = SealOf(keys.auth, audit::Serialize(auth));
  sealed[sealed.size() - 10] ^= 1;
  Set(f, "seal", sealed);
  Write(t, "bad_signature", fuzz::EncodeFields(0, f));
  f = Entry(auth);
  {
    // The second event of a bundle of three: a seal with a path.
    const std::string envelopes[] = {audit::Serialize(app), audit::Serialize(auth),
                                     audit::Serialize(RichEvent())};
    auto seals = seal::SealBundle(keys.auth, {envelopes[0], envelopes[1], envelopes[2]});
    FUZZ_CHECK(seals.ok(), seals.status().ToString());
    Set(f, "seal", (*seals)[1]);
  }
  Write(t, "valid_auth_in_a_bundle", fuzz::EncodeFields(0, f));

  Write(t, "signed_by_app_key",
        fuzz::EncodeFields(0, Entry(auth, audit::Serialize(auth), keys.app)));
  Write(t, "signed_by_admin_key",
        fuzz::EncodeFields(0, Entry(auth, audit::Serialize(auth), keys.admin)));
  f = Entry(auth);
  Set(f, "key_id", "0123456789abcdef");
  Write(t, "unknown_key", fuzz::EncodeFields(0, f));
  f = Entry(auth);
  Set(f, "seal", "");
  Write(t, "unsigned", fuzz::EncodeFields(0, f));
  f = Entry(auth);
  Drop(f, "envelope");
  Write(t, "missing_field", fuzz::EncodeFields(0, f));
  f = Entry(auth);
  f.emplace_back("key_id", keys.auth.key_id());
  Write(t, "duplicate_field", fuzz::EncodeFields(0, f));
  f = Entry(auth);
  f.emplace_back("trace_hint", "extra fields are tolerated");
  Write(t, "valid_extra_field", fuzz::EncodeFields(0, f));
  audit::AuditEvent upper = auth;
  upper.set_event_id(absl::AsciiStrToUpper(kId1));
  upper.mutable_record()->set_audit_id(upper.event_id());
  Write(t, "uppercase_event_id", fuzz::EncodeFields(0, Entry(upper)));
  audit::AuditEvent v3 = auth;
  v3.set_schema_version(audit::kSchemaVersion + 1);
  Write(t, "schema_version_3", fuzz::EncodeFields(0, Entry(v3)));

  Write(t, "envelope_garbage",
        fuzz::EncodeFields(0, Entry(auth, "not a serialized AuditEvent", keys.auth)));
  audit::AuditEvent e = Event(audit::v1::OWNER_AUTH, kId1, fuzz::Now() + absl::Hours(1));
  Write(t, "future_timestamp", fuzz::EncodeFields(0, Entry(e)));
  e = Event(audit::v1::OWNER_AUTH, kId1, absl::FromUnixSeconds(1000000000));
  Write(t, "old_timestamp", fuzz::EncodeFields(0, Entry(e)));
  e = auth;
  e.mutable_record()->set_actor(std::string("ali\0ce", 6));
  Write(t, "nul_in_actor", fuzz::EncodeFields(0, Entry(e)));
  e = auth;
  e.mutable_record()->set_audit_id(kId2);
  Write(t, "audit_id_mismatch", fuzz::EncodeFields(0, Entry(e)));
  e = auth;
  (*e.mutable_record()->mutable_new_value()->mutable_fields())["n"].set_number_value(
      std::numeric_limits<double>::infinity());
  Write(t, "infinite_number", fuzz::EncodeFields(0, Entry(e)));
}

void Envelope() {
  const std::string t = "fuzz_envelope";
  const auto& keys = fuzz::Keys();
  const absl::Time at = fuzz::Now() - absl::Seconds(5);
  auto signed_env = [&](const crypto::SigningKey& k, const std::string& env) {
    return fuzz::MustSign(k, env) + env;
  };
  const std::string auth = audit::Serialize(Event(audit::v1::OWNER_AUTH, kId1, at));
  Write(t, "valid_auth", signed_env(keys.auth, auth));
  Write(t, "valid_app",
        signed_env(keys.app, audit::Serialize(Event(audit::v1::OWNER_APP, kId2, at))));
  Write(t, "valid_app_rich", signed_env(keys.app, audit::Serialize(RichEvent())));
  Write(t, "valid_unsigned", std::string(64, '\0') + auth);
  audit::AuditEvent e = Event(audit::v1::OWNER_AUTH, kId1, at);
  e.set_owner(audit::v1::OWNER_UNSPECIFIED);
  Write(t, "no_owner", signed_env(keys.auth, audit::Serialize(e)));
  e = Event(audit::v1::OWNER_AUTH, kId1, at);
  e.mutable_record()->set_user_agent("bidi \xe2\x80\xae ok in call fields");
  Write(t, "valid_bidi_user_agent", signed_env(keys.auth, audit::Serialize(e)));
  e = Event(audit::v1::OWNER_AUTH, kId1, at);
  e.mutable_record()->set_entity_type("us\xe2\x80\xaer");
  Write(t, "bidi_entity_type", signed_env(keys.auth, audit::Serialize(e)));
  e = Event(audit::v1::OWNER_AUTH, kId1, at);
  (*e.mutable_record()->mutable_old_value()->mutable_fields())["k"].set_string_value("\xff\xfe");
  Write(t, "invalid_utf8_value", signed_env(keys.auth, audit::Serialize(e)));
  e = Event(audit::v1::OWNER_AUTH, kId1, at);
  e.mutable_occurred_at()->set_nanos(-1);
  Write(t, "negative_nanos", signed_env(keys.auth, audit::Serialize(e)));
  Write(t, "garbage", "\x0a\xff\xff\xff\xff\x0f short");
}

void PageToken() {
  const std::string t = "fuzz_page_token";
  admin::query::AuditFilters filters;
  filters.owner = "auth";
  filters.action = "create_user";
  filters.start_time = absl::FromUnixSeconds(1700000000);
  const uint64_t fp = admin::query::FilterFingerprint(filters);
  auto token = [&](absl::Time at, const std::string& id, uint64_t fingerprint) {
    auto tok = admin::query::EncodePageToken({at, id}, fingerprint);
    FUZZ_CHECK(tok.ok(), tok.status().ToString());
    return *tok;
  };
  const std::string good = token(absl::FromUnixMicros(1750000000123456), kId1, fp);
  Write(t, "valid", good);
  Write(t, "valid_epoch", token(absl::UnixEpoch(), kId2, fp));
  Write(t, "valid_max_time",
        token(absl::FromUnixMicros(253402300799LL * 1000000 + 999999), kId2, fp));
  Write(t, "valid_min_time", token(absl::FromUnixMicros(-62135596800LL * 1000000), kId1, fp));
  Write(t, "other_filters", token(absl::FromUnixMicros(1750000000123456), kId1, fp + 1));
  std::string mangled = good;
  mangled[7] = mangled[7] == 'A' ? 'B' : 'A';
  Write(t, "mangled", mangled);
  Write(t, "truncated", good.substr(0, good.size() - 4));
  Write(t, "not_base64", "page~token!");
  Write(t, "list_token", admin::query::EncodeListToken(admin::query::ListKind::kPoison, 42, 7));
  Write(t, "list_token_other_list",
        admin::query::EncodeListToken(admin::query::ListKind::kWatch, 42, 7));
}

std::string Bytes(const google::protobuf::MessageLite& m) { return m.SerializeAsString(); }

void RequestValidation() {
  const std::string t = "fuzz_request_validation";
  auto write = [&](const std::string& name, int mode, const std::string& body) {
    Write(t, name, std::string(1, static_cast<char>(mode)) + body);
  };
  {
    auth::v1::CreateUserRequest r;
    r.set_username("alice");
    r.set_email("alice@example.org");
    r.set_display_name("Alice \xc3\x89lise");
    r.set_request_id("req-1");
    write("create_user_valid", 0, Bytes(r));
    r.set_email("alice@@example");
    write("create_user_bad_email", 0, Bytes(r));
  }
  {
    auth::v1::DisableUserRequest r;
    r.set_user_id(kUserId);
    r.set_reason("left the\nteam");
    write("disable_user_valid", 1, Bytes(r));
  }
  {
    auth::v1::AssignRoleRequest r;
    r.set_user_id(kUserId);
    r.set_role("contest_admin");
    write("assign_role_valid", 2, Bytes(r));
    auth::v1::RevokeRoleRequest v;
    v.set_user_id("not-a-uuid");
    v.set_role("Admin");
    v.set_request_id("has space");
    write("revoke_role_invalid", 3, Bytes(v));
  }
  {
    auth::v1::UpdateLoginPolicyRequest r;
    auto* p = r.mutable_login_policy();
    p->set_min_password_length(12);
    p->set_lockout_threshold(5);
    p->set_mfa_required(true);
    p->mutable_session_lifetime()->set_seconds(86400);
    write("update_login_policy_valid", 4, Bytes(r));
    p->mutable_session_lifetime()->set_seconds(59);
    write("update_login_policy_invalid", 4, Bytes(r));
    r.mutable_update_mask()->add_paths("mfa_required");
    r.mutable_update_mask()->add_paths("version");
    write("update_login_policy_bad_mask", 4, Bytes(r));
  }
  {
    app::v1::CreateProblemRequest r;
    r.set_slug("a-plus-b");
    r.set_title("A + B");
    r.set_statement("Add two numbers.\n\tInput: a b");
    r.mutable_time_limit()->set_seconds(1);
    r.set_memory_limit_mb(256);
    r.set_difficulty(1);
    write("create_problem_valid", 5, Bytes(r));
    r.set_title(std::string("A\0B", 3));
    write("create_problem_nul_title", 5, Bytes(r));
  }
  {
    app::v1::UpdateProblemRequest r;
    r.mutable_problem()->set_problem_id(kId1);
    r.mutable_update_mask()->add_paths("title");
    r.mutable_update_mask()->add_paths("difficulty");
    r.mutable_problem()->set_title("A + B (easy)");
    r.mutable_problem()->set_difficulty(2);
    write("update_problem_valid", 6, Bytes(r));
    r.mutable_update_mask()->add_paths("slug");
    write("update_problem_unknown_path", 6, Bytes(r));
  }
  {
    app::v1::CreateContestRequest r;
    r.set_slug("round-1");
    r.set_title("Round 1");
    r.mutable_starts_at()->set_seconds(1760000000);
    r.mutable_ends_at()->set_seconds(1760007200);
    write("create_contest_valid", 7, Bytes(r));
    r.mutable_ends_at()->set_seconds(1760000000);
    r.mutable_ends_at()->set_nanos(999);
    write("create_contest_same_micros", 7, Bytes(r));
  }
  {
    app::v1::AddProblemToContestRequest r;
    r.set_contest_id(kId2);
    r.set_problem_id(kId1);
    r.set_label("A");
    write("add_problem_valid", 8, Bytes(r));
    app::v1::RemoveProblemFromContestRequest v;
    v.set_contest_id(kId2);
    v.set_problem_id(kId1);
    write("remove_problem_valid", 9, Bytes(v));
    app::v1::PublishContestRequest p;
    p.set_contest_id(kId2);
    p.set_request_id(std::string(129, 'x'));
    write("publish_contest_long_request_id", 10, Bytes(p));
  }
  write("text_valid", 11, "plain text, \xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80");
  write("text_multiline", 11, "line 1\nline 2\ttab");
  write("text_bidi", 11,
        "abc\xe2\x80\xae"
        "def");
  write("text_invalid_utf8", 11, "ab\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80");
  write("text_controls", 11, std::string("a\0b\r\x7f\xc2\x85", 7));
  write("text_slug", 11, "round-1");
}

// RESP2 replies as Admin's bridge reads them; the first two bytes are the
// limits byte and the split position (fuzz_bounded_replies.cc).
void BoundedReplies() {
  const std::string t = "fuzz_bounded_replies";
  Write(t, "xreadgroup_two_entries",
        "\x3f\x10*1\r\n*2\r\n$4\r\ns:ab\r\n*2\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nk\r\n$1\r\n"
        "v\r\n*2\r\n$3\r\n2-0\r\n*4\r\n$1\r\na\r\n$20\r\naaaaaaaaaaaaaaaaaaaa\r\n$1\r\nb\r\n"
        "$20\r\nbbbbbbbbbbbbbbbbbbbb\r\n");
  Write(t, "many_fields",
        "\xff\x05*1\r\n*2\r\n$3\r\n1-0\r\n*6\r\n$1\r\na\r\n$1\r\nb\r\n"
        "$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n");
  Write(t, "xautoclaim_with_deleted",
        "\xc8\x01*3\r\n$3\r\n0-0\r\n*1\r\n*2\r\n$3\r\n1-0\r\n$-1\r\n*1\r\n$3\r\n2-0\r\n");
  Write(t, "scalars_and_nesting",
        "\x81\x03+OK\r\n:42\r\n-ERR no\r\n$-1\r\n*-1\r\n*0\r\n*1\r\n*1\r\n*1\r\n:1\r\n");
  Write(t, "large_bulk", "\x01\x02$100\r\n" + std::string(100, 'x') + "\r\n");
  Write(t, "protocol_error", "\x10\x01*2\r\n?bad\r\n");
}

// Byte 0 picks the parser (fuzz_tlog.cc): a leaf, a checkpoint, a verifier
// key, a signed note, an entry bundle, proofs, a cosignature line, a run of
// a tree with edits.
void Tlog() {
  const std::string t = "fuzz_tlog";
  const auto& keys = fuzz::Keys();
  Write(t, "leaf",
        std::string(1, '\0') + tlog::EncodeLeaf({"auth", kId1, "0123456789abcdef",
                                                 SealOf(keys.auth, "envelope"), "envelope"}));
  const tlog::Checkpoint c{"fuzz.log", 5, tlog::LeafHash("x"), {"extension"}};
  Write(t, "checkpoint", "\x01" + tlog::CheckpointText(c));
  auto signer = tlog::NoteSigner::Create("fuzz.log", keys.admin);
  FUZZ_CHECK(signer.ok(), signer.status().ToString());
  Write(t, "verifier_key", "\x02" + signer->VerifierKey());
  auto note = signer->Sign(tlog::CheckpointText(c));
  FUZZ_CHECK(note.ok(), note.status().ToString());
  Write(t, "signed_note", "\x03" + *note);
  Write(t, "entry_bundle", "\x04" + tlog::EncodeEntryBundle({"leaf-0", "", "leaf-2"}));
  Write(t, "proofs",
        "\x05" + tlog::EncodeProofs({{kId1,
                                      3,
                                      {tlog::LeafHash("a"), tlog::LeafHash("b")},
                                      keys.auth.key_id(),
                                      SealOf(keys.auth, "a")},
                                     {kId1, 0, {}, keys.auth.key_id(), SealOf(keys.auth, "b")}}));
  auto witness = tlog::CosignatureSigner::Create("fuzz.witness", keys.admin);
  FUZZ_CHECK(witness.ok(), witness.status().ToString());
  auto line = witness->Cosign(tlog::CheckpointText(c), 1700000000);
  FUZZ_CHECK(line.ok(), line.status().ToString());
  Write(t, "cosignature", "\x06" + *line);
  // Size 300, leaves 37..140, one leaf byte and one proof byte changed.
  Write(t, "range", std::string("\x07\x01\x2c\x00\x25\x00\x67\x00\x05\x09\x01\x02\x03", 13));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  g_root = argv[1];
  EntryValidation();
  Envelope();
  PageToken();
  RequestValidation();
  BoundedReplies();
  Tlog();
  std::printf("corpus_gen: wrote %d files under %s\n", g_files, g_root.c_str());
  return 0;
}
