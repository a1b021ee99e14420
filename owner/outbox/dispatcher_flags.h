// Dispatcher settings as flags (+ ULTICODE_* environment). Setting
// --dispatch-poll-interval=2s --dispatch-batch-size=50 --dispatch-notify=false
// reproduces the original system's polling, for side-by-side benchmarks.
#pragma once

#include "common/config/flags.h"
#include "owner/outbox/dispatcher.h"

namespace ulticode::outbox {

void RegisterDispatcherFlags(config::Flags& flags, DispatcherOptions* options);

}  // namespace ulticode::outbox
