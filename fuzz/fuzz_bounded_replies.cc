// redis::BoundedReplies on arbitrary reply bytes (RESP2), as Admin's bridge
// connections read them from a Redis that anyone with an owner's login can
// fill.
//
// Input: byte 0 sets the limits (array bytes 8..512, array elements
// 1..8), the rest is fed to a hiredis reader in two pieces split at byte 1's
// position. Invariants: every reply the reader returns is a well-formed tree
// that freeReplyObject frees (ASan and LeakSanitizer check); an array
// either keeps all its elements within both limits or is the error reply
// "ulticode: omitted: ..." with no elements; no string kept under an array
// makes that array's direct string bytes pass the limit.
#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "common/redis/bounded_replies.h"
#include "fuzz/fuzz_support.h"

using namespace ::ulticode;  // NOLINT

namespace {

void Check(const redisReply* r, const redis::ReplyLimits& limits, int depth) {
  FUZZ_CHECK(depth < 10000, "depth");
  if (r->type == REDIS_REPLY_ERROR &&
      absl::StartsWith(std::string(r->str, r->len), redis::kOmittedPrefix)) {
    FUZZ_CHECK(r->elements == 0 && r->element == nullptr, "an omitted array keeps elements");
    return;
  }
  if (r->type != REDIS_REPLY_ARRAY) return;
  FUZZ_CHECK(r->elements <= limits.max_array_elements, "too many elements kept");
  size_t bytes = 0;
  for (size_t i = 0; i < r->elements; ++i) {
    const redisReply* e = r->element[i];
    FUZZ_CHECK(e != nullptr, "a hole in an array");
    if (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS ||
        (e->type == REDIS_REPLY_ERROR &&
         !absl::StartsWith(std::string(e->str, e->len), redis::kOmittedPrefix))) {
      bytes += e->len;
    }
    Check(e, limits, depth + 1);
  }
  FUZZ_CHECK(bytes <= limits.max_array_bytes, "an array kept more bytes than its limit");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  redis::ReplyLimits limits;
  limits.max_array_bytes = 8 * (1 + (data[0] & 0x3f));
  limits.max_array_elements = 1 + (data[0] >> 6) * 2 + (data[0] >> 7);
  limits.max_element_bytes = 64;
  const std::string input(reinterpret_cast<const char*>(data + 2), size - 2);
  const size_t split = input.empty() ? 0 : data[1] % (input.size() + 1);
  redis::BoundedReplies bounded(limits);
  redisReader* reader = redisReaderCreate();
  bounded.Install(reader);
  for (const std::string& piece : {input.substr(0, split), input.substr(split)}) {
    if (redisReaderFeed(reader, piece.data(), piece.size()) != REDIS_OK) break;
    for (;;) {
      void* reply = nullptr;
      if (redisReaderGetReply(reader, &reply) != REDIS_OK) break;
      if (reply == nullptr) break;
      Check(static_cast<redisReply*>(reply), limits, 0);
      freeReplyObject(reply);
    }
    (void)bounded.ElementTooLarge(reader);
  }
  redisReaderFree(reader);
  return 0;
}
