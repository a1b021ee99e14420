// An HTTP webhook destination (docs/forwarding.md, "Webhook"): a POST per
// batch, one JSON object a line (application/x-ndjson), signed with the
// shared secret: X-Ulticode-Timestamp (Unix seconds) and
// X-Ulticode-Signature "v1=" hex(HMAC-SHA256(secret, timestamp "." body)).
// Each row carries its log index, the receiver's idempotency key; the
// request's Idempotency-Key names the batch's first and last index. 2xx
// is delivered; 400, 413, 415 and 422 refuse the rows (INVALID_ARGUMENT);
// any other status (redirects are not followed: 401, 403, 404, 5xx...), a
// timeout or no connection is tried again (UNAVAILABLE).
// The secret file is read for each request (rotation needs no restart).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "forward/destination.h"

namespace ulticode::forward {

struct WebhookOptions {
  std::string url;
  std::string secret_file;
  std::string ca_file;  // https: instead of the system's CAs
  absl::Duration timeout = absl::Seconds(10);
};

// Not thread-safe: one per sink.
class Webhook final : public Destination {
 public:
  // INVALID_ARGUMENT for a URL that is not http(s)://.
  static absl::StatusOr<std::unique_ptr<Webhook>> Create(WebhookOptions options);
  ~Webhook() override;
  absl::Status Deliver(absl::Span<const Row> rows) override;

 private:
  explicit Webhook(WebhookOptions options);
  const WebhookOptions options_;
  void* curl_ = nullptr;  // CURL*, reused: its connection stays open
};

// What logs and errors say of a webhook URL: its scheme, host and port
// only (paths and queries of webhook URLs often hold a token).
std::string UrlForLogs(absl::string_view url);

// The signature header's value for `body` sent at `timestamp`.
std::string WebhookSignature(absl::string_view secret, absl::string_view timestamp,
                             absl::string_view body);

}  // namespace ulticode::forward
