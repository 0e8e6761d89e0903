#pragma once

// The redis backend's I/O thread and what it keeps (redis_backend.hpp says what the backend
// does). One file per job: redis_connection.cpp dials the nodes and marks them down,
// redis_io_thread.cpp is the poll loop, redis_pipeline.cpp turns batches into pipelined
// commands, redis_reader.cpp reads replies (a get's parts straight into their spans),
// redis_replies.cpp settles replies and answers batches, redis_list.cpp lists what a pool holds
// when it is rebuilt.

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "storage/redis_backend.hpp"

namespace kvtier {

struct redis_backend::loop {
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
  }

  static constexpr int64_t ms = 1'000'000;
  static constexpr int64_t first_backoff_ns = 50 * ms;
  static constexpr int64_t max_backoff_ns = 2'000 * ms;
  // A node silent this long with commands out, or not connected this long after its dial, is
  // down.
  static constexpr int64_t op_timeout_ns = 1'000 * ms;
  static constexpr const char* part_suffix[2] = {":k", ":v"};
  // reply_to::part of a rolled-back part's DEL (a put's parts are 0 and 1).
  static constexpr uint8_t rollback_part = 2;

  enum class op_kind { exists, get, put, remove };

  // One batch, from submission until its last reply.
  struct batch {
    op_kind what = op_kind::exists;
    std::vector<block_ref> blocks;
    std::vector<block_bytes_t> payloads;
    storage_backend::exists_done on_exists;
    storage_backend::get_done on_get;
    storage_backend::put_done on_put;
    storage_backend::remove_done on_remove;
    // results
    std::vector<uint8_t> parts_ok, parts_done;  // put: per block
    std::vector<bool> present;                  // exists; get: found; remove: gone
    std::vector<block_span> into;               // get: where each block's bytes go
    size_t remaining = 0;  // commands without a reply
    int64_t started_ns = 0;
  };

  // A command waiting for room in its connection's output buffer. hiredis copies each command
  // into one buffer and moves what is left to the front after every socket write: handed a whole
  // batch of megabyte values at once, it would copy the batch over and over. So each connection
  // gets commands only while less than `buffer_limit` bytes wait to be written.
  struct queued {
    std::shared_ptr<batch> b;
    uint32_t block = 0;
    uint8_t part = 0;
    std::vector<std::string> words;  // the command, its payload at `payload_at` (if any)
    const uint8_t* payload = nullptr;
    size_t payload_len = 0;
    size_t payload_at = 0;
  };
  static constexpr size_t buffer_limit = 4u << 20;

  struct node {
    loop* owner = nullptr;
    uint32_t index = 0;
    std::string host;
    int port = 0;
    redisAsyncContext* ctx = nullptr;
    bool connected = false;  // and authenticated: commands may go out
    bool ever_connected = false;
    int64_t dialled_ns = 0;
    bool want_read = false, want_write = false;
    int64_t retry_at = 0;
    int64_t backoff_ns = first_backoff_ns;
    uint64_t pending = 0;       // commands out
    int64_t last_progress = 0;  // last reply (or first command after an idle spell)
    std::atomic<bool> up{false};
    std::deque<queued> waiting;  // commands not yet handed to hiredis (not ready, buffer full)
    std::string refusal;  // why its last handshake failed (under error_mutex); "" if it did not
  };

  // What a command's reply goes back to.
  struct reply_to {
    loop* owner;
    std::shared_ptr<batch> b;
    uint32_t block;
    uint8_t part;  // put: which part
    node* n;
    uint64_t first_part_len = 0;  // get: the ":k" part's length, once the reader has seen it
  };

  const backend_options& options;
  std::vector<std::unique_ptr<node>> nodes;
  int wake_fd = -1;
  std::mutex mutex;
  std::deque<std::shared_ptr<batch>> submitted;
  bool stopping = false;
  std::thread thread;

  // counters (read from any thread)
  std::atomic<uint64_t> puts_ok{0}, puts_failed{0}, gets_hit{0}, gets_missed{0}, rollbacks{0},
    bytes_written{0}, bytes_read{0}, removed{0}, node_downs{0}, reconnects{0}, batches{0},
    corrupt{0}, auth_failures{0};
  std::atomic<int64_t> busy_ns{0};
  mutable std::mutex error_mutex;
  std::string put_error;  // the first failed put's reason (under error_mutex)

  // -- nodes and their connections (redis_connection.cpp) --
  explicit loop(const backend_options& o);
  ~loop();
  // -- hiredis event hooks: record what the connection waits for; the poll loop does the rest --
  static void add_read(void* p) { static_cast<node*>(p)->want_read = true; }
  static void del_read(void* p) { static_cast<node*>(p)->want_read = false; }
  static void add_write(void* p) { static_cast<node*>(p)->want_write = true; }
  static void del_write(void* p) { static_cast<node*>(p)->want_write = false; }
  // Called whenever hiredis frees a context (error, disconnect, our free): the node is down.
  static void cleanup(void* p);
  static void on_connect(const redisAsyncContext* c, int status);
  static void on_handshake(redisAsyncContext* c, void* r, void* priv);
  void ready(node& n);
  static void on_disconnect(const redisAsyncContext*, int) {}
  void dial(node& n);

  // -- the reply reader (redis_reader.cpp) --
  static inline thread_local node* reading = nullptr;
  static redisReply* new_reply(const redisReadTask* task, int type);
  static uint8_t* span_for(const redisReadTask* task, size_t len);
  static void* reader_string(const redisReadTask* task, char* str, size_t len);
  static void* reader_array(const redisReadTask* task, int elements);
  static void* reader_integer(const redisReadTask* task, long long value);
  static void* reader_nil(const redisReadTask* task);
  static redisReplyObjectFunctions reader_functions;

  // -- replies (redis_replies.cpp) --
  static void on_reply(redisAsyncContext*, void* r, void* priv);
  bool landed_whole(redisReply* r, block_span into);
  void settle(reply_to& to, redisReply* r);
  void note_put_error(redisReply* r, const node& n);
  void answer(const std::shared_ptr<batch>& bp);

  // -- commands (redis_pipeline.cpp) --
  bool command(node& n, const std::shared_ptr<batch>& b, uint32_t block, uint8_t part,
               std::vector<std::string> words, const uint8_t* payload = nullptr,
               size_t payload_len = 0, size_t payload_at = 0);
  void pump(node& n);
  void settle_unsent(node& n, queued& q);
  void del_part(node& n, const std::shared_ptr<batch>& b, uint32_t block, int part);
  void dispatch(const std::shared_ptr<batch>& bp);

  // -- the I/O thread (redis_io_thread.cpp) --
  void wake();
  void submit(std::shared_ptr<batch> b);
  void read_available(node& n);
  void run();
};

}  // namespace kvtier
