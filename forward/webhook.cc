#include "forward/webhook.h"

#include <curl/curl.h>
#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/crypto/crypto.h"

namespace ulticode::forward {
namespace {

size_t Collect(char* data, size_t size, size_t n, void* out) {
  auto* body = static_cast<std::string*>(out);
  if (body->size() < 512) body->append(data, std::min(size * n, 512 - body->size()));
  return size * n;
}

// curl's global state, once per process.
void InitCurl() {
  static const bool done = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
  (void)done;
}

}  // namespace

std::string UrlForLogs(absl::string_view url) {
  const size_t scheme = url.find("://");
  if (scheme == absl::string_view::npos) return "(not a URL)";
  absl::string_view rest = url.substr(scheme + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (const size_t at = rest.rfind('@'); at != absl::string_view::npos) {
    rest = rest.substr(at + 1);
  }
  return absl::StrCat(url.substr(0, scheme + 3), rest);
}

std::string WebhookSignature(absl::string_view secret, absl::string_view timestamp,
                             absl::string_view body) {
  return absl::StrCat("v1=", absl::BytesToHexString(
                                 crypto::HmacSha256(secret, absl::StrCat(timestamp, ".", body))));
}

Webhook::Webhook(WebhookOptions options) : options_(std::move(options)) {
  InitCurl();
  curl_ = curl_easy_init();
}

Webhook::~Webhook() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

absl::StatusOr<std::unique_ptr<Webhook>> Webhook::Create(WebhookOptions options) {
  if (!absl::StartsWith(options.url, "http://") && !absl::StartsWith(options.url, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("webhook.url: ", UrlForLogs(options.url), " is not http(s)://"));
  }
  if (options.secret_file.empty()) {
    return absl::InvalidArgumentError("webhook.secret_file: required (the HMAC key)");
  }
  if (auto secret = crypto::ReadSecretFile(options.secret_file); !secret.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("webhook.secret_file: ", secret.status().message()));
  }
  if (!options.ca_file.empty() && ::access(options.ca_file.c_str(), R_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("webhook.ca_file: cannot read ", options.ca_file));
  }
  return std::unique_ptr<Webhook>(new Webhook(std::move(options)));
}

absl::Status Webhook::Deliver(absl::Span<const Row> rows) {
  if (rows.empty()) return absl::OkStatus();
  auto secret = crypto::ReadSecretFile(options_.secret_file);
  if (!secret.ok()) return absl::UnavailableError(std::string(secret.status().message()));
  std::string body;
  for (const Row& row : rows) absl::StrAppend(&body, row.json, "\n");
  const std::string timestamp = absl::StrCat(absl::ToUnixSeconds(absl::Now()));
  const std::string first = absl::StrCat(rows.front().log.log_index());
  const std::string last = absl::StrCat(rows.back().log.log_index());
  curl_slist* headers = nullptr;
  for (const std::string& h :
       {std::string("Content-Type: application/x-ndjson"),
        absl::StrCat("X-Ulticode-Timestamp: ", timestamp),
        absl::StrCat("X-Ulticode-Signature: ", WebhookSignature(*secret, timestamp, body)),
        absl::StrCat("X-Ulticode-Log-Indexes: ", first, "-", last),
        absl::StrCat("Idempotency-Key: ulticode-", first, "-", last), std::string("Expect:")}) {
    headers = curl_slist_append(headers, h.c_str());
  }
  CURL* c = static_cast<CURL*>(curl_);
  curl_easy_reset(c);
  std::string reply;
  curl_easy_setopt(c, CURLOPT_URL, options_.url.c_str());
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(options_.timeout)));
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply);
  if (!options_.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, options_.ca_file.c_str());
  const CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    return absl::UnavailableError(
        absl::StrCat("POST ", UrlForLogs(options_.url), ": ", curl_easy_strerror(rc)));
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 200 && status < 300) return absl::OkStatus();
  const std::string what = absl::StrCat("POST ", UrlForLogs(options_.url), ": HTTP ", status, " ",
                                        absl::CHexEscape(reply.substr(0, 200)));
  // Refusals of the rows themselves; anything else (401, 403, 404, a
  // redirect, a 5xx...) is the receiver's or our configuration: tried
  // again until fixed, never a reason to drop rows.
  if (status == 400 || status == 413 || status == 415 || status == 422) {
    return absl::InvalidArgumentError(what);
  }
  return absl::UnavailableError(what);
}

}  // namespace ulticode::forward
