// --inbox-* settings of the bridge (each with its ULTICODE_INBOX_* twin).
#pragma once

#include "admin/inbox/bridge.h"
#include "common/config/flags.h"

namespace ulticode::admin::inbox {

// Registers the flags; `auth_stream` / `app_stream` receive the stream keys
// (empty = audit::StreamFor(owner)). Call FinishBridgeOptions after parsing.
void RegisterBridgeFlags(config::Flags& flags, BridgeOptions* options, std::string* auth_stream,
                         std::string* app_stream);
void FinishBridgeOptions(BridgeOptions* options, const std::string& auth_stream,
                         const std::string& app_stream);

}  // namespace ulticode::admin::inbox
