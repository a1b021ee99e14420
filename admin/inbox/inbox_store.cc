#include "admin/inbox/inbox_store.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/crypto/crypto.h"
#include "common/text/text.h"

namespace ulticode::admin::inbox {
namespace {

// Payloads travel as hex text arrays (unnest of a text[]), decoded in SQL.
// A row written PROCESSED (its audit_logs row in the same transaction) gets
// no payload or seal: only the SHA-256 a re-delivery is compared with
// (admin/migrations/0001_admin.sql).
constexpr pg::Statement kRequestProofs{
    "inbox.request_proofs",
    "INSERT INTO log_proof_requests (event_id, owner)"
    " SELECT * FROM unnest($1::uuid[], $2::text[]) ON CONFLICT (event_id) DO NOTHING"};

constexpr pg::Statement kInsert{
    "inbox.insert_if_absent",
    "INSERT INTO consumer_inbox (consumer, event_id, owner, event_type, payload, payload_sha256,"
    "   stream, stream_entry_id, seal, key_id, status, processed_at)"
    " SELECT $1, t.id, t.owner, t.type, CASE WHEN $10 = 'PENDING' THEN decode(t.p, 'hex') END,"
    "   decode(t.sha, 'hex'), t.stream, t.entry,"
    "   CASE WHEN $10 = 'PENDING' THEN decode(t.seal, 'hex') END, t.key, $10,"
    "   CASE WHEN $10 = 'PROCESSED' THEN now() END"
    " FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],"
    "   $8::text[], $9::text[], $11::text[])"
    "   AS t(id, owner, type, p, stream, entry, seal, key, sha)"
    " ON CONFLICT (consumer, event_id) DO NOTHING"
    " RETURNING event_id::text",
    absl::Seconds(30)};

constexpr pg::Statement kCompare{
    "inbox.compare_existing",
    "SELECT i.event_id::text, i.payload_sha256 = decode(t.sha, 'hex'), i.owner"
    " FROM unnest($2::uuid[], $3::text[]) AS t(id, sha)"
    " JOIN consumer_inbox i ON i.consumer = $1 AND i.event_id = t.id",
    absl::Seconds(30)};

constexpr pg::Statement kPoison{
    "inbox.store_poison",
    "INSERT INTO poison_events (consumer, stream, stream_entry_id, event_id, reason, detail, "
    "fields)"
    " SELECT $1, t.stream, t.entry, NULLIF(t.eid, ''), t.reason, t.detail, t.fields::jsonb"
    " FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])"
    "   AS t(stream, entry, eid, reason, detail, fields)"
    // fields_sha256 is set by a trigger: an entry id repeated with other
    // fields (Redis restarted behind its old clock) is another entry.
    " ON CONFLICT (consumer, stream, stream_entry_id, fields_sha256) DO NOTHING",
    absl::Seconds(30)};

// Larger values (an oversized entry) are recorded by size only, and so is
// every value once a row's stored values reach kMaxStoredEntryBytes: a
// poison row must always fit, or the poison would block its stream.
constexpr size_t kMaxStoredFieldBytes = 64 * 1024;
constexpr size_t kMaxStoredEntryBytes = 256 * 1024;

bool Printable(absl::string_view s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c >= 0x7f) return false;
  }
  return true;
}

std::string JsonString(absl::string_view s) {
  // Printable ASCII only reaches here: escape the two JSON specials.
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

}  // namespace

std::string FieldsJson(const redis::StreamFields& fields) {
  std::string out = "[";
  size_t stored = 0;
  for (size_t i = 0; i < fields.size(); ++i) {
    const auto& [raw_name, value] = fields[i];
    if (i > 0) out += ",";
    const absl::string_view name = absl::string_view(raw_name).substr(0, 256);
    const std::string shown_name =
        Printable(name) ? JsonString(name) : JsonString(absl::BytesToHexString(name));
    if (name == audit::kPersonalField) {
      // Personal values stay out of the poison store (docs/personal-data.md):
      // a poison row is evidence about the entry, kept for weeks, and no
      // erasure reaches it.
      absl::StrAppend(&out, "{\"name\":", shown_name, ",\"omitted_personal_bytes\":", value.size(),
                      "}");
      continue;
    }
    stored += name.size() + value.size();
    if (value.size() > kMaxStoredFieldBytes || stored > kMaxStoredEntryBytes) {
      absl::StrAppend(&out, "{\"name\":", shown_name, ",\"omitted_bytes\":", value.size(), "}");
    } else if (Printable(value)) {
      absl::StrAppend(&out, "{\"name\":", shown_name, ",\"text\":", JsonString(value), "}");
    } else {
      absl::StrAppend(&out, "{\"name\":", shown_name, ",\"hex\":\"", absl::BytesToHexString(value),
                      "\"}");
    }
  }
  out += "]";
  return out;
}

absl::StatusOr<TakeOver> InsertIfAbsent(pg::Transaction& tx, const std::string& consumer,
                                        const std::vector<Arrival>& arrivals, InsertAs status) {
  TakeOver result;
  if (arrivals.empty()) return result;
  const bool keep_payload = status == InsertAs::kPending;
  std::vector<std::string> ids, owners, types, payloads, streams, entries, seals, keys, shas;
  for (const Arrival& a : arrivals) {
    seals.push_back(keep_payload ? absl::BytesToHexString(a.entry.seal) : "");
    keys.push_back(a.entry.key_id);
    ids.push_back(a.entry.event_id);
    owners.push_back(audit::OwnerName(a.entry.owner));
    types.push_back(a.entry.event_type);
    payloads.push_back(keep_payload ? absl::BytesToHexString(a.entry.envelope) : "");
    shas.push_back(absl::BytesToHexString(crypto::Sha256(a.entry.envelope)));
    streams.push_back(a.stream);
    entries.push_back(a.entry_id);
  }
  ASSIGN_OR_RETURN(
      pg::Result inserted,
      tx.Execute(kInsert, {pg::Text(consumer), pg::TextArray(ids), pg::TextArray(owners),
                           pg::TextArray(types), pg::TextArray(payloads), pg::TextArray(streams),
                           pg::TextArray(entries), pg::TextArray(seals), pg::TextArray(keys),
                           pg::Text(keep_payload ? "PENDING" : "PROCESSED"), pg::TextArray(shas)}));
  result.inserted = inserted.rows();
  if (result.inserted == static_cast<int64_t>(arrivals.size())) {
    for (const Arrival& a : arrivals) result.fresh.push_back(&a);
    return result;
  }

  absl::flat_hash_map<std::string, bool> was_inserted;
  for (int i = 0; i < inserted.rows(); ++i) was_inserted[inserted.GetString(i, 0)] = true;
  std::vector<std::string> other_ids, other_shas;
  absl::flat_hash_map<std::string, const Arrival*> by_id;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    if (was_inserted.contains(ids[i])) {
      result.fresh.push_back(&arrivals[i]);
      continue;
    }
    other_ids.push_back(ids[i]);
    other_shas.push_back(shas[i]);
    by_id[ids[i]] = &arrivals[i];
  }
  ASSIGN_OR_RETURN(pg::Result same,
                   tx.Execute(kCompare, {pg::Text(consumer), pg::TextArray(other_ids),
                                         pg::TextArray(other_shas)}));
  if (same.rows() != static_cast<int>(other_ids.size())) {
    // ON CONFLICT skipped them, so they exist in this snapshot's successor;
    // anything else is a bug worth failing the batch for (nothing is acked).
    return absl::InternalError(absl::StrCat("inbox: ", other_ids.size() - same.rows(),
                                            " skipped rows not found on re-read"));
  }
  for (int i = 0; i < same.rows(); ++i) {
    auto it = by_id.find(same.GetString(i, 0));
    if (it == by_id.end()) {
      return absl::InternalError(
          absl::StrCat("inbox: re-read returned unexpected event id ", same.GetString(i, 0)));
    }
    const Arrival* a = it->second;
    const std::string holder = same.GetString(i, 2);
    if (holder != audit::OwnerName(a->entry.event.owner())) {
      result.foreign.emplace_back(a, holder);
    } else {
      (same.GetBool(i, 1) ? result.duplicates : result.conflicts).push_back(a);
    }
  }
  return result;
}

absl::Status RequestProofs(pg::Transaction& tx, const std::vector<const Arrival*>& redelivered) {
  if (redelivered.empty()) return absl::OkStatus();
  std::vector<std::string> ids, owners;
  for (const Arrival* a : redelivered) {
    ids.push_back(a->entry.event_id);
    owners.push_back(audit::OwnerName(a->entry.owner));
  }
  return tx.Execute(kRequestProofs, {pg::TextArray(ids), pg::TextArray(owners)}).status();
}

absl::StatusOr<int64_t> StorePoison(pg::Transaction& tx, const std::string& consumer,
                                    const std::vector<Poison>& poison) {
  if (poison.empty()) return 0;
  std::vector<std::string> streams, entries, event_ids, reasons, details, fields;
  for (const Poison& p : poison) {
    streams.push_back(p.stream);
    entries.push_back(p.entry_id);
    event_ids.push_back(p.event_id);
    reasons.push_back(std::string(PoisonReasonName(p.reason)));
    details.push_back(std::string(text::TruncateUtf8(p.detail, 1000)));
    fields.push_back(FieldsJson(p.fields));
  }
  ASSIGN_OR_RETURN(
      pg::Result r,
      tx.Execute(kPoison, {pg::Text(consumer), pg::TextArray(streams), pg::TextArray(entries),
                           pg::TextArray(event_ids), pg::TextArray(reasons), pg::TextArray(details),
                           pg::TextArray(fields)}));
  return r.affected_rows();
}

}  // namespace ulticode::admin::inbox
