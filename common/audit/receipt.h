// The receipt contract: how Admin tells an owner "these events are durably
// in my inbox, with exactly these bytes" (see docs/guarantees.md and
// docs/security.md).
//
// Receipts travel on a stream beside the owner's audit stream
// (`<audit stream>:receipts`, e.g. `audit:auth:receipts`); Admin is its only
// writer, the owner its only reader, and the owner remains the only writer of
// its own tables. One entry per inbox batch lists every event of that batch
// now in the inbox (new or duplicate) with the SHA-256 of the envelope Admin
// holds and the publication it answers (the `publication` field of the
// owner's stream entry), and is signed with Admin's Ed25519 key:
//
//   events     "<event id>:<sha256 hex>:<publication>,..."  (":<publication>"
//              absent for an entry without one, from a previous release)
//   key_id     Admin's key id (crypto::KeyIdOf)
//   signature  Ed25519 over "ulticode.receipt.v1\n<audit stream>\n<events>"
//
// A receipt that is unsigned, signed by a key that is not Admin's, signed for
// another stream or malformed in any way is refused whole. Receipts are
// idempotent: applying one twice, late or never is harmless (a missing one
// only causes a re-send, which the inbox absorbs), and one re-posted after
// the owner replayed the row confirms nothing (outbox::Confirm).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/crypto/crypto.h"
#include "common/crypto/key_directory.h"
#include "common/redis/redis_client.h"

namespace ulticode::audit {

// The stream entry field carrying the owner's publication number: a
// positive decimal, not signed (it only routes the receipt back; the bytes
// receipted are the signed envelope's).
inline constexpr char kPublicationField[] = "publication";

// The publication number of an owner's stream entry; 0 when the field is
// absent or not a canonical positive decimal (such a receipt confirms
// nothing, and the owner publishes again).
int64_t PublicationOf(const redis::StreamFields& fields);

// The largest receipt entry for a batch of `events` stream entries, in bytes
// of field names and values: what a byte budget for a receipt stream is
// divided by.
size_t MaxReceiptBytes(int events);

// The key directory party whose keys sign receipts.
inline constexpr char kReceiptSigner[] = "admin";

// "<stream>:receipts".
std::string ReceiptStreamFor(absl::string_view audit_stream);

struct ReceiptItem {
  std::string event_id;        // canonical lowercase UUID
  std::string payload_sha256;  // 32 raw bytes
  int64_t publication = 0;     // the publication answered; 0: none named
};

// The signed stream entry for a batch read from `audit_stream`. Fails with
// SigningKey::Sign's status when signing fails: there is no unsigned receipt.
absl::StatusOr<redis::StreamFields> EncodeReceipt(absl::string_view audit_stream,
                                                  const std::vector<ReceiptItem>& items,
                                                  const crypto::SigningKey& signer);

// The items of a receipt entry read beside `audit_stream`, after checking its
// signature against the "admin" keys of `keys`. INVALID_ARGUMENT (missing or
// repeated field, malformed item) or PERMISSION_DENIED (unknown key, a key
// that is not Admin's, bad signature) naming the problem.
absl::StatusOr<std::vector<ReceiptItem>> DecodeReceipt(absl::string_view audit_stream,
                                                       const redis::StreamFields& fields,
                                                       const crypto::KeyDirectory& keys);

}  // namespace ulticode::audit
