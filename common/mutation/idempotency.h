// AIP-155 request ids: a repeat of a request by the same principal returns
// the first response and changes nothing more; the same id with another
// request is INVALID_ARGUMENT. The key (principal, request_id) lives in the
// service's `idempotency_keys` table and is written in the same transaction
// as the change it answers for, so both commit or vanish together.
//
//   IdempotencyKey key(method, request, principal, request_id);
//   ASSIGN_OR_RETURN(bool seen, key.Replay(tx, response));  // locks the key
//   if (seen) return tx.Commit();
//   ... the change, filling `response` ...
//   key.Save(tx, response);  // goes out with COMMIT
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/pg/connection.h"
#include "google/protobuf/message.h"

namespace ulticode::mutation {

// Validates a client-supplied request id: empty (no key), or a UUID in its
// canonical text (8-4-4-4-12 hex digits, either case). The audit record
// keeps it for good, so it may not be free text that could carry a name.
absl::Status ValidateRequestId(absl::string_view request_id);

class IdempotencyKey {
 public:
  // An empty request_id: no key (every call runs).
  IdempotencyKey(absl::string_view method, const google::protobuf::Message& request,
                 absl::string_view principal, absl::string_view request_id);

  // Serializes concurrent repeats of the key (a transaction lock) and, when
  // the key answered before, fills `response` with that answer: true.
  absl::StatusOr<bool> Replay(pg::Transaction& tx, google::protobuf::Message& response) const;
  // Stores `response` as the key's answer (deferred: it goes with COMMIT).
  void Save(pg::Transaction& tx, const google::protobuf::Message& response) const;

 private:
  std::string method_;
  std::string principal_;
  std::string request_id_;
  std::string request_hash_;
};

}  // namespace ulticode::mutation
