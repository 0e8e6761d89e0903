#include "storage/redis_loop.hpp"

#include <cstdlib>
#include <cstring>

namespace kvtier {

// hiredis's own reader copies every string reply out of its input buffer into an object of
// its own; a get's parts would then be copied once more into the block's span. This reader
// builds the same redisReply objects, except that a get's parts are copied from the input
// buffer straight into the span (their reply strings stay null): one copy, as a plain GET
// has. The reply being read answers the first callback waiting on its connection (replies come
// in command order), which names the batch and block; the connection being read is the one
// the I/O thread is handling now (`reading`).
redisReply* redis_backend::loop::new_reply(const redisReadTask* task, int type) {
  auto* r = static_cast<redisReply*>(std::calloc(1, sizeof(redisReply)));
  if (!r)
    return nullptr;
  r->type = type;
  if (task->parent) {
    auto* parent = static_cast<redisReply*>(task->parent->obj);
    parent->element[task->idx] = r;
  }
  return r;
}

// Where a string the reader has just completed goes: a get part's place in its block's span,
// or null (an ordinary reply string).
uint8_t* redis_backend::loop::span_for(const redisReadTask* task, size_t len) {
  node* n = reading;
  if (!n || !n->ctx || task->type != REDIS_REPLY_STRING || !task->parent || task->idx > 1)
    return nullptr;
  redisCallback* cb = n->ctx->replies.head;
  if (!cb || cb->fn != on_reply || !cb->privdata)
    return nullptr;
  auto* to = static_cast<reply_to*>(cb->privdata);
  if (to->b->what != op_kind::get)
    return nullptr;
  block_span into = to->b->into[to->block];
  uint64_t offset = task->idx == 0 ? 0 : to->first_part_len;
  if (task->idx == 0)
    to->first_part_len = len;
  if (offset + len > into.size)
    return nullptr;  // not this block's length: kept as a string, answered as a miss
  return into.data + offset;
}

void* redis_backend::loop::reader_string(const redisReadTask* task, char* str, size_t len) {
  redisReply* r = new_reply(task, task->type);
  if (!r)
    return nullptr;
  r->len = len;
  if (uint8_t* into = span_for(task, len)) {
    std::memcpy(into, str, len);
    return r;
  }
  r->str = static_cast<char*>(std::malloc(len + 1));
  if (!r->str) {
    std::free(r);
    return nullptr;
  }
  std::memcpy(r->str, str, len);
  r->str[len] = '\0';
  return r;
}

void* redis_backend::loop::reader_array(const redisReadTask* task, int elements) {
  redisReply* r = new_reply(task, REDIS_REPLY_ARRAY);
  if (!r || elements <= 0)
    return r;
  r->element = static_cast<redisReply**>(std::calloc(static_cast<size_t>(elements),
                                                     sizeof(redisReply*)));
  if (!r->element) {
    std::free(r);
    return nullptr;
  }
  r->elements = static_cast<size_t>(elements);
  return r;
}

void* redis_backend::loop::reader_integer(const redisReadTask* task, long long value) {
  redisReply* r = new_reply(task, REDIS_REPLY_INTEGER);
  if (r)
    r->integer = value;
  return r;
}

void* redis_backend::loop::reader_nil(const redisReadTask* task) {
  return new_reply(task, REDIS_REPLY_NIL);
}

redisReplyObjectFunctions redis_backend::loop::reader_functions = {
  reader_string, reader_array, reader_integer, reader_nil, freeReplyObject};

}  // namespace kvtier
