#include "common/ids/uuid.h"

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/synchronization/mutex.h"

namespace ulticode::ids {
namespace {

struct V7State {
  absl::Mutex mu;
  int64_t last_ms ABSL_GUARDED_BY(mu) = -1;
  uint16_t counter ABSL_GUARDED_BY(mu) = 0;
  absl::BitGen gen ABSL_GUARDED_BY(mu);
};

V7State& State() {
  static auto* state = new V7State();
  return *state;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string NewUuidV7() { return NewUuidV7At(absl::Now()); }

std::string NewUuidV7At(absl::Time now) {
  uint8_t b[16];
  int64_t ms = absl::ToUnixMillis(now);
  uint16_t counter;
  uint64_t rand_b;
  {
    V7State& st = State();
    absl::MutexLock lock(&st.mu);
    if (ms <= st.last_ms) {
      // Same (or earlier: clock stepped back) millisecond: keep ordering by
      // counting within the last one; on counter overflow borrow the next ms.
      ms = st.last_ms;
      if (++st.counter > 0x0FFF) {
        ++ms;
        st.counter = absl::Uniform<uint16_t>(st.gen, 0, 0x0800);
      }
    } else {
      st.counter = absl::Uniform<uint16_t>(st.gen, 0, 0x0800);
    }
    st.last_ms = ms;
    counter = st.counter;
    rand_b = absl::Uniform<uint64_t>(st.gen);
  }
  for (int i = 0; i < 6; ++i) b[i] = static_cast<uint8_t>(ms >> (8 * (5 - i)));
  b[6] = static_cast<uint8_t>(0x70 | ((counter >> 8) & 0x0F));
  b[7] = static_cast<uint8_t>(counter & 0xFF);
  for (int i = 0; i < 8; ++i) b[8 + i] = static_cast<uint8_t>(rand_b >> (8 * i));
  b[8] = static_cast<uint8_t>(0x80 | (b[8] & 0x3F));

  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out.push_back(kHex[b[i] >> 4]);
    out.push_back(kHex[b[i] & 0x0F]);
  }
  return out;
}

bool IsValidUuid(absl::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != '-') return false;
    } else if (HexValue(s[i]) < 0) {
      return false;
    }
  }
  return true;
}

bool UuidV7Time(absl::string_view s, absl::Time* out) {
  if (!IsValidUuid(s) || s[14] != '7') return false;
  int64_t ms = 0;
  for (size_t i = 0; i < 13; ++i) {
    if (s[i] == '-') continue;
    ms = (ms << 4) | HexValue(s[i]);
  }
  *out = absl::FromUnixMillis(ms);
  return true;
}

}  // namespace ulticode::ids
