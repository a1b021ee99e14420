// How the owners witness Admin's log over Redis (docs/transparency-log.md,
// "Witnesses"):
//  - Admin puts each new checkpoint on an owner's proof stream
//    (`<audit stream>:proofs`) as an entry of three fields: the signed
//    note, the size of the checkpoint the owner last cosigned (0: none)
//    and the RFC 9162 consistency proof from that size. The entry needs no
//    signature of its own: the log's key signed the note, and the proof
//    ties it to what the owner holds.
//    With the checkpoint come the inclusion proofs of that owner's events
//    the checkpoint covers, at most kProofsPerEntry an entry, each entry of
//    one send marked `log_part` i/n; a send followed by more proofs of the
//    same checkpoint carries `log_more`. The owner confirms an outbox row
//    only when its proof verifies, and cosigns once it has every part of a
//    send without `log_more`.
//  - The owner answers on `<audit stream>:cosignatures` with the size and
//    its c2sp.org/tlog-cosignature line; Admin keeps what verifies.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/tlog/merkle.h"

namespace ulticode::tlog {

inline constexpr char kCheckpointField[] = "log_checkpoint";
inline constexpr char kFromField[] = "log_from";
inline constexpr char kConsistencyField[] = "log_consistency";
inline constexpr char kProofsField[] = "log_proofs";
inline constexpr char kMoreField[] = "log_more";
inline constexpr char kPartField[] = "log_part";  // "<i>/<n>" of one send
inline constexpr size_t kProofsPerEntry = 256;

inline constexpr char kSizeField[] = "size";
inline constexpr char kCosignatureField[] = "cosignature";

// "<audit stream>:proofs": Admin writes, the owner reads.
std::string ProofStreamFor(absl::string_view audit_stream);

// "<audit stream>:cosignatures": the owner writes, Admin reads.
std::string CosignatureStreamFor(absl::string_view audit_stream);

// Base64 of the hashes, concatenated; the decoder refuses anything that is
// not whole hashes.
std::string EncodeHashes(const std::vector<Hash>& hashes);
absl::StatusOr<std::vector<Hash>> DecodeHashes(absl::string_view encoded);

// One event's place in the log: its leaf index and RFC 9162 PATH, and the
// key id and seal its leaf holds (Admin logs the seal of the first delivery
// it accepted; the owner's row may keep another, from a publishing cycle
// that rolled back after its XADD, so the owner does not rebuild the leaf
// from its row alone).
struct LeafProof {
  std::string event_id;
  uint64_t index = 0;
  std::vector<Hash> hashes;
  std::string key_id;
  std::string seal;
  bool operator==(const LeafProof&) const = default;
};
// "<event id>:<index>:<EncodeHashes>:<key id>:<base64 seal>,..."; empty
// for none.
std::string EncodeProofs(const std::vector<LeafProof>& proofs);
// INVALID_ARGUMENT naming the item that is malformed.
absl::StatusOr<std::vector<LeafProof>> DecodeProofs(absl::string_view encoded);

}  // namespace ulticode::tlog
