#include "admin/inbox/bridge_flags.h"

namespace ulticode::admin::inbox {

void RegisterBridgeFlags(config::Flags& flags, BridgeOptions* o, std::string* auth_stream,
                         std::string* app_stream) {
  flags.String("inbox-auth-stream", auth_stream, "Auth's audit stream (default: audit:auth)");
  flags.String("inbox-app-stream", app_stream, "App's audit stream (default: audit:app)");
  flags.String("inbox-group", &o->group, "consumer group Admin reads the owner streams with");
  flags.String("inbox-consumer-name", &o->consumer_name,
               "this process's consumer name in the group (default: hostname-pid; must be unique)");
  flags.Int("inbox-batch-size", &o->batch_size, "stream entries read and taken over per batch", 1,
            10000);
  flags.Duration("inbox-block", &o->block, "XREADGROUP BLOCK time", absl::Milliseconds(10),
                 absl::Minutes(1));
  flags.Duration("inbox-claim-idle", &o->claim_idle,
                 "take over entries pending this long with another (crashed) consumer",
                 absl::Milliseconds(100), absl::Hours(24));
  flags.Duration("inbox-claim-interval", &o->claim_interval,
                 "how often to scan the group's pending list for such entries",
                 absl::Milliseconds(100), absl::Hours(1));
  o->write_audit_logs = true;
  flags.Bool("inbox-write-audit-logs", &o->write_audit_logs,
             "write audit_logs rows in the inbox transaction (false: every event goes through "
             "the lease consumer, one more claim and settle per event)");
  flags.Duration("inbox-max-future-skew", &o->limits.max_future_skew,
                 "how far ahead of Admin's clock an event's occurred_at may be",
                 absl::ZeroDuration(), absl::Hours(24));
}

void FinishBridgeOptions(BridgeOptions* o, const std::string& auth_stream,
                         const std::string& app_stream) {
  o->streams = {
      {audit::v1::OWNER_AUTH,
       auth_stream.empty() ? audit::StreamFor(audit::v1::OWNER_AUTH) : auth_stream},
      {audit::v1::OWNER_APP,
       app_stream.empty() ? audit::StreamFor(audit::v1::OWNER_APP) : app_stream},
  };
}

}  // namespace ulticode::admin::inbox
