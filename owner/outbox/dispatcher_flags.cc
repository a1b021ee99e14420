#include "owner/outbox/dispatcher_flags.h"

namespace ulticode::outbox {

void RegisterDispatcherFlags(config::Flags& flags, DispatcherOptions* o) {
  flags.Int("dispatch-threads", &o->threads, "outbox dispatcher threads", 1, 64);
  flags.Int("dispatch-batch-size", &o->batch_size, "outbox rows claimed and published per batch", 1,
            10000);
  flags.Duration(
      "dispatch-poll-interval", &o->poll_interval,
      "how often dispatchers look for due rows that no commit of this process woke them for",
      absl::Milliseconds(10), absl::Hours(1));
  flags.Duration("dispatch-linger", &o->linger,
                 "after a cycle that found rows, wait this long for more before the next claim",
                 absl::ZeroDuration(), absl::Seconds(1));
  flags.Bool("dispatch-notify", &o->wake_on_commit,
             "wake a dispatcher at each commit of an audited change in this process (off: the "
             "poll interval alone)");
  flags.Duration("dispatch-claim-lease", &o->claim_lease,
                 "how long a dispatcher may hold rows idle in its transaction before PostgreSQL "
                 "ends its session and others take them",
                 absl::Milliseconds(100), absl::Hours(1));
  flags.Duration("dispatch-backoff-base", &o->backoff.base, "first retry delay after a failure",
                 absl::Milliseconds(1), absl::Minutes(10));
  flags.Duration("dispatch-backoff-max", &o->backoff.max, "cap on the retry delay",
                 absl::Milliseconds(1), absl::Hours(24));
  flags.Duration("dispatch-resend-timeout", &o->resend_timeout,
                 "publish a row again when Admin acknowledged it this long ago and it is still "
                 "unproved, then after twice as long, and so on; a row whose entry is gone unread "
                 "is published again at once, one still unread never (0 = never)",
                 absl::ZeroDuration(), absl::Hours(24));
  flags.String("dispatch-admin-group", &o->admin_group,
               "Admin's consumer group on the stream (Admin's --inbox-group): what it "
               "acknowledged tells the resend sweep what was delivered");
  flags.String("dispatch-stream", &o->stream,
               "Redis stream to publish to (default: audit:<owner>)");
}

}  // namespace ulticode::outbox
