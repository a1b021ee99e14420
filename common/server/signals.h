// Termination signals handled synchronously: BlockTerminationSignals() must
// run in main() before any thread starts (threads inherit the mask), then
// WaitForTerminationSignal() returns once SIGTERM or SIGINT arrives.
#pragma once

namespace ulticode::server {

void BlockTerminationSignals();
// Returns the signal number received.
int WaitForTerminationSignal();

}  // namespace ulticode::server
