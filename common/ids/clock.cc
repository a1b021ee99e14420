#include "common/ids/clock.h"

#include "absl/time/clock.h"

namespace ulticode::ids {
namespace {
class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};
}  // namespace

const Clock& SystemClock() {
  static const RealClock* clock = new RealClock();
  return *clock;
}

}  // namespace ulticode::ids
