#include "tools/verify/served_row.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "admin/query/audit_rows.h"
#include "common/audit/event.h"
#include "common/base/status_macros.h"
#include "common/export/row_text.h"
#include "common/tlog/leaf.h"
#include "common/tlog/merkle.h"
#include "google/protobuf/util/message_differencer.h"
#include "tools/verify/check.h"

namespace ulticode::verify {

absl::StatusOr<tlog::Checkpoint> OpenWitnessed(const admin::v1::SignedCheckpoint& signed_checkpoint,
                                               const CheckpointPolicy& policy) {
  ASSIGN_OR_RETURN(const std::string text,
                   tlog::OpenNote(signed_checkpoint.checkpoint(), policy.log));
  ASSIGN_OR_RETURN(tlog::Checkpoint checkpoint, tlog::ParseCheckpoint(text));
  const size_t quorum = policy.quorum == 0 ? policy.witnesses.size() : policy.quorum;
  std::set<size_t> cosigned;
  for (const std::string& line : signed_checkpoint.cosignatures()) {
    for (size_t w = 0; w < policy.witnesses.size(); ++w) {
      if (policy.witnesses[w].Verify(text, line).ok()) cosigned.insert(w);
    }
  }
  if (cosigned.size() < quorum) {
    return absl::UnavailableError(absl::StrCat("checkpoint ", checkpoint.size, " is cosigned by ",
                                               cosigned.size(), " of the ", quorum,
                                               " witnesses the policy needs"));
  }
  return checkpoint;
}

absl::Status CheckRowIsLeaf(const admin::v1::AuditLog& log, absl::string_view leaf_bytes,
                            const crypto::KeyDirectory* owners) {
  const std::string& id = log.event_id();
  auto leaf = tlog::DecodeLeaf(leaf_bytes);
  audit::v1::AuditEvent event;
  if (!leaf.ok() || !event.ParseFromString(leaf->envelope) || leaf->event_id != id ||
      event.event_id() != id || leaf->owner != audit::OwnerName(event.owner())) {
    return absl::DataLossError(
        absl::StrCat("audit log ", id, ": its log entry is not a sealed envelope of the event"));
  }
  if (owners != nullptr) {
    // Rows of one bundle arrive together: its signature is verified once.
    static seal::Verifier* const seals = new seal::Verifier();
    if (const absl::Status signed_by = CheckLeafSignature(*leaf, *owners, *seals);
        !signed_by.ok()) {
      return absl::DataLossError(absl::StrCat("audit log ", id, ": ", signed_by.message()));
    }
  }
  // Each present personal value must open its commitment: one changed
  // instead of erased is named.
  absl::StatusOr<audit::v1::AuditEvent> restored =
      exports::RestorePersonal(event, log.personal_values());
  if (!restored.ok()) return restored.status();
  admin::v1::AuditLog served = log;
  served.clear_ingested_at();
  served.clear_log_index();
  served.clear_log_status();
  served.clear_proof();
  served.clear_personal_values();
  std::string field;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&field);
  if (!differ.Compare(admin::query::AuditLogOfEvent(*restored), served)) {
    return absl::DataLossError(
        absl::StrCat("audit log ", id, ": served fields differ from its sealed envelope: ", field));
  }
  return absl::OkStatus();
}

absl::Status CheckInclusion(uint64_t index, absl::string_view leaf,
                            const google::protobuf::RepeatedPtrField<std::string>& hashes,
                            const tlog::Checkpoint& checkpoint) {
  std::vector<tlog::Hash> proof;
  for (const std::string& h : hashes) {
    ASSIGN_OR_RETURN(tlog::Hash hash, tlog::FromBytes(h));
    proof.push_back(hash);
  }
  return tlog::VerifyInclusion(index, checkpoint.size, tlog::LeafHash(leaf), proof,
                               checkpoint.root);
}

}  // namespace ulticode::verify
