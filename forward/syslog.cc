#include "forward/syslog.h"

#include <arpa/inet.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "google/protobuf/util/time_util.h"

namespace ulticode::forward {
namespace {

// PARAM-VALUE of RFC 5424: '"', '\' and ']' escaped with '\'.
std::string ParamValue(absl::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '"' || c == '\\' || c == ']') out += '\\';
    out += c;
  }
  return out;
}

// A header field: printable US-ASCII without spaces, at most `max`, "-" when empty.
std::string HeaderField(absl::string_view v, size_t max) {
  std::string out;
  for (char c : v.substr(0, max)) out += (c > 32 && c < 127) ? c : '_';
  return out.empty() ? "-" : out;
}

std::string OpenSslError() {
  char buf[256];
  ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
  return buf;
}

}  // namespace

std::string SyslogMessage(const Row& row, absl::string_view hostname) {
  const admin::v1::AuditLog& log = row.log;
  return absl::StrCat("<109>1 ", google::protobuf::util::TimeUtil::ToString(log.occurred_at()), " ",
                      HeaderField(hostname, 255), " ulticode-forward - ",
                      HeaderField(log.event_type(), 32), " [ulticode@32473 event_id=\"",
                      ParamValue(log.event_id()), "\" log_index=\"", log.log_index(), "\" owner=\"",
                      ParamValue(audit::v1::Owner_Name(log.owner())), "\" action=\"",
                      ParamValue(log.action()), "\" actor=\"", ParamValue(log.actor()), "\"] ",
                      "\xEF\xBB\xBF", row.json);
}

// One TCP connection, with TLS on it when asked.
class Syslog::Connection {
 public:
  static absl::StatusOr<std::unique_ptr<Connection>> Dial(const SyslogOptions& o) {
    const size_t colon = o.address.rfind(':');
    const std::string host = o.address.substr(0, colon), port = o.address.substr(colon + 1);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
      return absl::UnavailableError(absl::StrCat("syslog ", o.address, ": cannot resolve"));
    }
    auto c = std::unique_ptr<Connection>(new Connection());
    c->fd_ = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    // Bounds connect() too (Linux), and every write and read after it.
    timeval tv{static_cast<time_t>(absl::ToInt64Seconds(o.timeout)), 0};
    ::setsockopt(c->fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    ::setsockopt(c->fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const bool connected = c->fd_ >= 0 && ::connect(c->fd_, found->ai_addr, found->ai_addrlen) == 0;
    const int error = errno;
    freeaddrinfo(found);
    if (!connected) {
      return absl::UnavailableError(
          absl::StrCat("syslog ", o.address, ": cannot connect: ", std::strerror(error)));
    }
    if (o.tls) RETURN_IF_ERROR(c->StartTls(o, host));
    return c;
  }

  ~Connection() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    if (fd_ >= 0) ::close(fd_);
  }

  absl::Status Write(absl::string_view bytes) {
    while (!bytes.empty()) {
      const int n = ssl_ != nullptr
                        ? SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()))
                        : static_cast<int>(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL));
      if (n <= 0) return absl::UnavailableError(absl::StrCat("syslog: write failed: ", Why()));
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }

  // Until the receiver's TCP acknowledged every byte written, or `timeout`.
  absl::Status Drained(absl::Duration timeout) {
    const absl::Time end = absl::Now() + timeout;
    for (;;) {
      int queued = 0;
      if (::ioctl(fd_, SIOCOUTQ, &queued) != 0) {
        return absl::UnavailableError(absl::StrCat("syslog: ", std::strerror(errno)));
      }
      if (queued == 0) break;
      if (absl::Now() > end) {
        return absl::UnavailableError(
            absl::StrCat("syslog: ", queued, " bytes not acknowledged by the receiver"));
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
    // A receiver that closed meanwhile: its FIN (or RST) is readable now.
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      char byte;
      if (::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) <= 0) {
        return absl::UnavailableError("syslog: the receiver closed the connection");
      }
    }
    return absl::OkStatus();
  }

 private:
  Connection() = default;

  std::string Why() const { return ssl_ != nullptr ? OpenSslError() : std::strerror(errno); }

  absl::Status StartTls(const SyslogOptions& o, const std::string& host) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    const bool cas = o.ca_file.empty()
                         ? SSL_CTX_set_default_verify_paths(ctx_) == 1
                         : SSL_CTX_load_verify_locations(ctx_, o.ca_file.c_str(), nullptr) == 1;
    if (!cas) return absl::UnavailableError(absl::StrCat("syslog.ca_file: ", OpenSslError()));
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    // The certificate must name the address: its IP address, or its host
    // name (also sent as SNI, which IP addresses are not).
    in6_addr ip;
    if (inet_pton(AF_INET, host.c_str(), &ip) == 1 || inet_pton(AF_INET6, host.c_str(), &ip) == 1) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), host.c_str());
    } else {
      SSL_set_tlsext_host_name(ssl_, host.c_str());
      SSL_set1_host(ssl_, host.c_str());
    }
    if (SSL_connect(ssl_) != 1) {
      return absl::UnavailableError(
          absl::StrCat("syslog ", o.address, ": TLS handshake failed: ", OpenSslError()));
    }
    return absl::OkStatus();
  }

  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
};

Syslog::Syslog(SyslogOptions options) : options_(std::move(options)) {
  hostname_ = options_.hostname;
  if (hostname_.empty()) {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    hostname_ = name;
  }
}

Syslog::~Syslog() = default;

absl::StatusOr<std::unique_ptr<Syslog>> Syslog::Create(SyslogOptions options) {
  const size_t colon = options.address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(options.address.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("syslog.address: \"", options.address.substr(0, 64), "\" is not host:port"));
  }
  if (!options.ca_file.empty() && !options.tls) {
    return absl::InvalidArgumentError("syslog.ca_file: only with tls");
  }
  if (!options.ca_file.empty()) {
    // Loaded now as each dial will: a file that is not PEM certificates is
    // a configuration error, not a receiver's refusal of rows.
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    const bool loaded =
        ctx != nullptr && SSL_CTX_load_verify_locations(ctx, options.ca_file.c_str(), nullptr) == 1;
    if (ctx != nullptr) SSL_CTX_free(ctx);
    if (!loaded) {
      return absl::InvalidArgumentError(
          absl::StrCat("syslog.ca_file: cannot load CA certificates from ", options.ca_file));
    }
  }
  return std::unique_ptr<Syslog>(new Syslog(std::move(options)));
}

absl::Status Syslog::Deliver(absl::Span<const Row> rows) {
  if (connection_ == nullptr) {
    ASSIGN_OR_RETURN(connection_, Connection::Dial(options_));
  }
  std::string frames;
  for (const Row& row : rows) {
    const std::string message = SyslogMessage(row, hostname_);
    absl::StrAppend(&frames, message.size(), " ", message);
  }
  absl::Status s = connection_->Write(frames);
  if (s.ok()) s = connection_->Drained(options_.timeout);
  if (!s.ok()) connection_.reset();  // dialled again for the same rows
  return s;
}

}  // namespace ulticode::forward
