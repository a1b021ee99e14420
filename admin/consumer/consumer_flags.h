// --consumer-* settings of the lease consumer (each with its ULTICODE_CONSUMER_* twin).
#pragma once

#include "admin/consumer/lease_consumer.h"
#include "common/config/flags.h"

namespace ulticode::admin::consumer {

void RegisterConsumerFlags(config::Flags& flags, ConsumerOptions* options);

}  // namespace ulticode::admin::consumer
