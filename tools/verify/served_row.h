// What a client checks of the rows Admin serves (QueryAuditLogs with
// proofs, WatchAuditLogs): a row is what its log entry holds, the entry is
// in a checkpoint, and the checkpoint meets the witness policy. Used by
// ulticode-tail --verify; public keys only, no trust in Admin.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/crypto/key_directory.h"
#include "common/tlog/cosignature.h"
#include "common/tlog/note.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "ulticode/admin/v1/admin.pb.h"

namespace ulticode::verify {

struct CheckpointPolicy {
  std::vector<tlog::NoteVerifier> log;  // a signature by one of them
  std::vector<tlog::CosignatureVerifier> witnesses;
  size_t quorum = 0;  // cosignatures needed, by distinct keys (0: every witness)
};

// The checkpoint of `signed_checkpoint` (the log's note and the witnesses'
// cosignature lines) once a log key signed it and a quorum of the policy's
// witnesses cosigned it. UNAVAILABLE while fewer cosigned it (the witnesses
// may not have yet); FAILED_PRECONDITION or INVALID_ARGUMENT for a note
// the log did not sign or that is malformed.
absl::StatusOr<tlog::Checkpoint> OpenWitnessed(const admin::v1::SignedCheckpoint& signed_checkpoint,
                                               const CheckpointPolicy& policy);

// OK when every field of `log` but ingested_at, log_index, log_status and
// proof is what the envelope in `leaf` says, the leaf names the event and
// its owner, and (given `owners`, the key directory) the owner sealed the
// envelope. DATA_LOSS naming the event and what is wrong otherwise.
absl::Status CheckRowIsLeaf(const admin::v1::AuditLog& log, absl::string_view leaf,
                            const crypto::KeyDirectory* owners = nullptr);

// OK when `hashes` prove `leaf` at `index` in `checkpoint`'s tree.
absl::Status CheckInclusion(uint64_t index, absl::string_view leaf,
                            const google::protobuf::RepeatedPtrField<std::string>& hashes,
                            const tlog::Checkpoint& checkpoint);

}  // namespace ulticode::verify
