// Reply limits for a hiredis connection that reads what others wrote (Admin
// reading the owners' streams): whoever can XADD chooses the size of what a
// reader receives, and hiredis would build all of it in memory before the
// caller could look at it.
//
// With limits set, the reply objects are built by BoundedReplies instead of
// hiredis' defaults:
//  * an array whose direct string elements pass `max_array_bytes`, or that
//    announces more than `max_array_elements` elements, is replaced by an
//    error reply "ulticode: omitted: <why>" (for a stream entry: its field
//    list), and what it still receives is dropped without being copied;
//  * one string element still arriving in the read buffer past
//    `max_element_bytes` fails the read (ElementTooLarge) before it is
//    buffered whole (Redis' own proto-max-bulk-len bounds what can be
//    written; this bounds the reader when the server is not configured so).
// The rest of the reply (the other entries) is built as usual.
#pragma once

#include <hiredis/hiredis.h>

#include <cstddef>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "common/redis/redis_client.h"

namespace ulticode::redis {

class BoundedReplies {
 public:
  explicit BoundedReplies(ReplyLimits limits);
  BoundedReplies(const BoundedReplies&) = delete;
  BoundedReplies& operator=(const BoundedReplies&) = delete;

  // Makes `reader` build its replies here; this object must outlive it.
  void Install(redisReader* reader);
  // A string element is arriving that is larger than max_element_bytes.
  bool ElementTooLarge(const redisReader* reader) const;

  // hiredis' redisReplyObjectFunctions, bound to an instance via privdata.
  static void* CreateString(const redisReadTask* task, char* str, size_t len);
  static void* CreateArray(const redisReadTask* task, int elements);
  static void* CreateInteger(const redisReadTask* task, long long value);
  static void* CreateNil(const redisReadTask* task);

 private:
  // Where a new element goes: attached to its parent, or dropped (its parent
  // was omitted). Starts a new reply's bookkeeping at the root.
  bool Dropped(const redisReadTask* task);
  void Attach(const redisReadTask* task, redisReply* reply);
  void Omit(redisReply* array, size_t attached, const std::string& why);
  // Drops the bookkeeping of `reply` and its arrays before they are freed.
  void Forget(const redisReply* reply);

  const ReplyLimits limits_;
  redisReply dropped_{};  // stands in for every element that is not kept
  absl::flat_hash_map<const redisReply*, size_t> array_bytes_;
  absl::flat_hash_set<const redisReply*> omitted_;
};

}  // namespace ulticode::redis
