#include "admin/consumer/consumer_flags.h"

namespace ulticode::admin::consumer {

void RegisterConsumerFlags(config::Flags& flags, ConsumerOptions* o) {
  flags.Int("consumer-threads", &o->threads, "inbox worker threads", 1, 64);
  flags.Int("consumer-batch-size", &o->batch_size, "inbox rows claimed per batch", 1, 10000);
  flags.Duration("consumer-poll-interval", &o->poll_interval,
                 "inbox polling fallback when no NOTIFY arrives", absl::Milliseconds(10),
                 absl::Hours(1));
  flags.Bool("consumer-notify", &o->use_notify, "wake workers by LISTEN/NOTIFY on inbox inserts");
  flags.Duration("consumer-lease", &o->lease,
                 "how long a claimed row stays with its worker before others may take it",
                 absl::Milliseconds(100), absl::Hours(1));
  flags.Duration(
      "consumer-heartbeat", &o->heartbeat_interval,
      "lease renewal period while a batch is in hand (0 = off; keep well under the lease)",
      absl::ZeroDuration(), absl::Hours(1));
  flags.Int("consumer-max-attempts", &o->max_attempts, "attempts before a failing row goes DEAD", 1,
            1000);
  flags.Duration("consumer-retry-base", &o->retry_backoff.base, "first retry delay of a failed row",
                 absl::Milliseconds(1), absl::Hours(1));
  flags.Duration("consumer-retry-max", &o->retry_backoff.max, "cap on a failed row's retry delay",
                 absl::Milliseconds(1), absl::Hours(24));
  flags.String("consumer-instance-id", &o->instance_id,
               "lease owner name of this process (default: hostname-pid)");
}

}  // namespace ulticode::admin::consumer
