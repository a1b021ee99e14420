// A syslog destination (docs/forwarding.md, "Syslog"): one RFC 5424
// message a row, framed by RFC 6587 octet counting ("LEN SP MSG"), over
// TCP or TLS (RFC 5425; the receiver's certificate checked against the CA
// file and the address's host name). Syslog has no acknowledgement: a
// batch counts as delivered once every byte of it has been acknowledged
// by the receiver's TCP (the socket's send queue is empty); a connection
// that breaks before is dialled again and the batch sent again.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "forward/destination.h"

namespace ulticode::forward {

struct SyslogOptions {
  std::string address;  // host:port
  bool tls = false;
  std::string ca_file;
  std::string hostname;  // empty: this machine's name
  absl::Duration timeout = absl::Seconds(10);
};

// The RFC 5424 message of `row`: PRI 109 (facility 13, log audit;
// severity 5, notice), version 1, the event's occurred_at, HOSTNAME,
// APP-NAME ulticode-forward, no PROCID, MSGID the event type,
// structured data [ulticode@32473 event_id log_index owner action actor]
// and the row's JSON (after a UTF-8 BOM) as MSG.
std::string SyslogMessage(const Row& row, absl::string_view hostname);

class Syslog final : public Destination {
 public:
  // INVALID_ARGUMENT for an address that is not host:port.
  static absl::StatusOr<std::unique_ptr<Syslog>> Create(SyslogOptions options);
  ~Syslog() override;
  absl::Status Deliver(absl::Span<const Row> rows) override;

 private:
  class Connection;
  explicit Syslog(SyslogOptions options);
  const SyslogOptions options_;
  std::string hostname_;
  std::unique_ptr<Connection> connection_;
};

}  // namespace ulticode::forward
