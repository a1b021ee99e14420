#include "common/redis/bounded_replies.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ulticode::redis {
namespace {

// Reply objects exactly as hiredis builds them (calloc'd, strings malloc'd
// and NUL-terminated), so that freeReplyObject frees them.
redisReply* NewReply(int type) {
  auto* r = static_cast<redisReply*>(calloc(1, sizeof(redisReply)));
  if (r != nullptr) r->type = type;
  return r;
}

redisReply* NewText(int type, const char* str, size_t len) {
  redisReply* r = NewReply(type);
  if (r == nullptr) return nullptr;
  r->str = static_cast<char*>(malloc(len + 1));
  if (r->str == nullptr) {
    free(r);
    return nullptr;
  }
  if (len > 0) memcpy(r->str, str, len);
  r->str[len] = '\0';
  r->len = len;
  return r;
}

BoundedReplies* Self(const redisReadTask* task) {
  return static_cast<BoundedReplies*>(task->privdata);
}

}  // namespace

BoundedReplies::BoundedReplies(ReplyLimits limits) : limits_(limits) {
  dropped_.type = REDIS_REPLY_NIL;
}

void BoundedReplies::Install(redisReader* reader) {
  static redisReplyObjectFunctions functions = {
      &BoundedReplies::CreateString, &BoundedReplies::CreateArray, &BoundedReplies::CreateInteger,
      &BoundedReplies::CreateNil, &freeReplyObject};
  reader->fn = &functions;
  reader->privdata = this;  // (redisReaderSetPrivdata casts a pointer to int)
}

bool BoundedReplies::ElementTooLarge(const redisReader* reader) const {
  return limits_.max_element_bytes != 0 && reader->len - reader->pos > limits_.max_element_bytes;
}

bool BoundedReplies::Dropped(const redisReadTask* task) {
  if (task->parent == nullptr) {  // a new reply
    array_bytes_.clear();
    omitted_.clear();
    return false;
  }
  const auto* parent = static_cast<const redisReply*>(task->parent->obj);
  return parent == &dropped_ || omitted_.contains(parent);
}

void BoundedReplies::Attach(const redisReadTask* task, redisReply* reply) {
  if (task->parent == nullptr) return;
  auto* parent = static_cast<redisReply*>(task->parent->obj);
  parent->element[task->idx] = reply;
}

void BoundedReplies::Forget(const redisReply* reply) {
  if (reply->type != REDIS_REPLY_ARRAY) return;
  array_bytes_.erase(reply);
  omitted_.erase(reply);
  for (size_t i = 0; i < reply->elements; ++i) {
    if (reply->element[i] != nullptr) Forget(reply->element[i]);
  }
}

void BoundedReplies::Omit(redisReply* array, size_t attached, const std::string& why) {
  for (size_t i = 0; i < attached && i < array->elements; ++i) {
    if (array->element[i] == nullptr) continue;
    // A later array of this reply may get the same address.
    Forget(array->element[i]);
    freeReplyObject(array->element[i]);
  }
  free(array->element);
  array->element = nullptr;
  array->elements = 0;
  const std::string text = absl::StrCat(kOmittedPrefix, why);
  array->type = REDIS_REPLY_ERROR;
  array->str = static_cast<char*>(malloc(text.size() + 1));
  if (array->str != nullptr) {
    memcpy(array->str, text.data(), text.size() + 1);
    array->len = text.size();
  }
  omitted_.insert(array);
}

void* BoundedReplies::CreateString(const redisReadTask* task, char* str, size_t len) {
  BoundedReplies* self = Self(task);
  if (self->Dropped(task)) return &self->dropped_;
  if (task->parent != nullptr && self->limits_.max_array_bytes != 0) {
    auto* parent = static_cast<redisReply*>(task->parent->obj);
    size_t& bytes = self->array_bytes_[parent];
    bytes += len;
    if (bytes > self->limits_.max_array_bytes) {
      self->Omit(parent, static_cast<size_t>(task->idx),
                 absl::StrCat(parent->elements, " elements over ", self->limits_.max_array_bytes,
                              " bytes"));
      return &self->dropped_;
    }
  }
  redisReply* r = NewText(task->type, str, len);
  if (r == nullptr) return nullptr;
  self->Attach(task, r);
  return r;
}

void* BoundedReplies::CreateArray(const redisReadTask* task, int elements) {
  BoundedReplies* self = Self(task);
  if (self->Dropped(task)) return &self->dropped_;
  redisReply* r = NewReply(REDIS_REPLY_ARRAY);
  if (r == nullptr) return nullptr;
  const size_t n = elements > 0 ? static_cast<size_t>(elements) : 0;
  if (self->limits_.max_array_elements != 0 && n > self->limits_.max_array_elements) {
    self->Attach(task, r);
    self->Omit(r, 0, absl::StrCat(n, " elements, over ", self->limits_.max_array_elements));
    return r;
  }
  if (n > 0) {
    r->element = static_cast<redisReply**>(calloc(n, sizeof(redisReply*)));
    if (r->element == nullptr) {
      free(r);
      return nullptr;
    }
  }
  r->elements = n;
  self->Attach(task, r);
  return r;
}

void* BoundedReplies::CreateInteger(const redisReadTask* task, long long value) {
  BoundedReplies* self = Self(task);
  if (self->Dropped(task)) return &self->dropped_;
  redisReply* r = NewReply(REDIS_REPLY_INTEGER);
  if (r == nullptr) return nullptr;
  r->integer = value;
  self->Attach(task, r);
  return r;
}

void* BoundedReplies::CreateNil(const redisReadTask* task) {
  BoundedReplies* self = Self(task);
  if (self->Dropped(task)) return &self->dropped_;
  redisReply* r = NewReply(REDIS_REPLY_NIL);
  if (r == nullptr) return nullptr;
  self->Attach(task, r);
  return r;
}

}  // namespace ulticode::redis
