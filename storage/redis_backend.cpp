#include "storage/redis_backend.hpp"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <hiredis/sds.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <deque>
#include <mutex>
#include <stdexcept>

#include <absl/container/flat_hash_map.h>

#include "core/check.hpp"

namespace kvtier {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

constexpr int64_t ms = 1'000'000;
constexpr int64_t first_backoff_ns = 50 * ms;
constexpr int64_t max_backoff_ns = 2'000 * ms;
constexpr int64_t op_timeout_ns = 1'000 * ms;  // a node silent this long with commands out is down
constexpr const char* part_suffix[2] = {":k", ":v"};

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
  std::vector<bool> present;                  // exists; get: found
  std::vector<block_span> into;               // get: where each block's bytes go
  size_t remaining = 0;  // commands without a reply
  int64_t started_ns = 0;
};

}  // namespace

struct redis_backend::loop {
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
    bool connected = false;
    bool ever_connected = false;
    bool want_read = false, want_write = false;
    int64_t retry_at = 0;
    int64_t backoff_ns = first_backoff_ns;
    uint64_t pending = 0;       // commands out
    int64_t last_progress = 0;  // last reply (or first command after an idle spell)
    std::atomic<bool> up{false};
    std::deque<queued> waiting;  // commands not yet handed to hiredis (its buffer is full)
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
    corrupt{0};
  std::atomic<int64_t> busy_ns{0};

  explicit loop(const backend_options& o) : options(o) {
    wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd < 0)
      throw std::runtime_error("storage.redis: eventfd failed");
    for (uint32_t i = 0; i < o.redis.size(); ++i) {
      auto n = std::make_unique<node>();
      n->owner = this;
      n->index = i;
      std::tie(n->host, n->port) = parse_redis_address(o.redis[i]);
      nodes.push_back(std::move(n));
    }
  }

  ~loop() {
    if (wake_fd >= 0)
      ::close(wake_fd);
  }

  void wake() {
    uint64_t one = 1;
    ssize_t r = ::write(wake_fd, &one, sizeof(one));
    (void)r;
  }

  void submit(std::shared_ptr<batch> b) {
    {
      std::lock_guard<std::mutex> guard(mutex);
      submitted.push_back(std::move(b));
    }
    wake();
  }

  // -- hiredis event hooks: record what the connection waits for; the poll loop does the rest --
  static void add_read(void* p) { static_cast<node*>(p)->want_read = true; }
  static void del_read(void* p) { static_cast<node*>(p)->want_read = false; }
  static void add_write(void* p) { static_cast<node*>(p)->want_write = true; }
  static void del_write(void* p) { static_cast<node*>(p)->want_write = false; }
  // Called whenever hiredis frees a context (error, disconnect, our free): the node is down.
  static void cleanup(void* p) {
    node* n = static_cast<node*>(p);
    n->ctx = nullptr;
    n->want_read = n->want_write = false;
    if (n->up)
      ++n->owner->node_downs;
    n->connected = false;
    n->up = false;
    n->pending = 0;
    n->retry_at = now_ns() + n->backoff_ns;
    n->backoff_ns = std::min(n->backoff_ns * 2, max_backoff_ns);
  }
  static void on_connect(const redisAsyncContext* c, int status) {
    node* n = static_cast<node*>(c->data);
    if (status != REDIS_OK)
      return;  // hiredis frees the context next: cleanup() marks the node down
    if (n->ever_connected)
      ++n->owner->reconnects;
    n->connected = n->ever_connected = true;
    n->up = true;
    n->backoff_ns = first_backoff_ns;
    n->last_progress = now_ns();
  }
  static void on_disconnect(const redisAsyncContext*, int) {}

  void dial(node& n) {
    redisAsyncContext* c = redisAsyncConnect(n.host.c_str(), n.port);
    if (!c)
      return;
    if (c->err) {
      redisAsyncFree(c);
      n.retry_at = now_ns() + n.backoff_ns;
      n.backoff_ns = std::min(n.backoff_ns * 2, max_backoff_ns);
      return;
    }
    n.ctx = c;
    c->data = &n;
    c->ev.data = &n;
    c->ev.addRead = add_read;
    c->ev.delRead = del_read;
    c->ev.addWrite = add_write;
    c->ev.delWrite = del_write;
    c->ev.cleanup = cleanup;
    c->c.reader->fn = &reader_functions;
    c->c.reader->maxbuf = 0;  // keep the input buffer: it grows to a part's size once, not per part
    redisAsyncSetConnectCallback(c, on_connect);  // after the hooks: it asks for a write event
    redisAsyncSetDisconnectCallback(c, on_disconnect);
  }

  // -- the reply reader ---------------------------------------------------------------------
  // hiredis's own reader copies every string reply out of its input buffer into an object of
  // its own; a get's parts would then be copied once more into the block's span. This reader
  // builds the same redisReply objects, except that a get's parts are copied from the input
  // buffer straight into the span (their reply strings stay null): one copy, as a plain GET
  // has. The reply being read answers the first callback waiting on its connection (replies come
  // in command order), which names the batch and block; the connection being read is the one
  // the I/O thread is handling now (`reading`).
  static inline thread_local node* reading = nullptr;

  static redisReply* new_reply(const redisReadTask* task, int type) {
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
  static uint8_t* span_for(const redisReadTask* task, size_t len) {
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

  static void* reader_string(const redisReadTask* task, char* str, size_t len) {
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
  static void* reader_array(const redisReadTask* task, int elements) {
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
  static void* reader_integer(const redisReadTask* task, long long value) {
    redisReply* r = new_reply(task, REDIS_REPLY_INTEGER);
    if (r)
      r->integer = value;
    return r;
  }
  static void* reader_nil(const redisReadTask* task) { return new_reply(task, REDIS_REPLY_NIL); }
  static inline redisReplyObjectFunctions reader_functions = {
    reader_string, reader_array, reader_integer, reader_nil, freeReplyObject};

  // -- replies -------------------------------------------------------------------------------
  static void on_reply(redisAsyncContext*, void* r, void* priv) {
    auto* to = static_cast<reply_to*>(priv);
    to->owner->settle(*to, static_cast<redisReply*>(r));
    delete to;
  }

  // An MGET of a block's two parts: whether both came and fill the block's span exactly. The
  // parts are copied in here unless the reader already wrote them there (reply_into).
  bool landed_whole(redisReply* r, block_span into) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2)
      return false;
    redisReply* k = r->element[0];
    redisReply* v = r->element[1];
    if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
      return false;
    if (k->len + v->len != into.size) {
      ++corrupt;
      return false;
    }
    if (k->str)
      std::memcpy(into.data, k->str, k->len);
    if (v->str)
      std::memcpy(into.data + k->len, v->str, v->len);
    return true;
  }

  void settle(reply_to& to, redisReply* r) {
    batch& b = *to.b;
    if (to.n->pending > 0)
      --to.n->pending;
    to.n->last_progress = now_ns();
    switch (b.what) {
      case op_kind::exists:
        b.present[to.block] = r && r->type == REDIS_REPLY_INTEGER && r->integer == 2;
        break;
      case op_kind::get:
        b.present[to.block] = r && landed_whole(r, b.into[to.block]);
        break;
      case op_kind::put: {
        bool ok = r && r->type == REDIS_REPLY_STATUS;
        if (ok)
          b.parts_ok[to.block] |= static_cast<uint8_t>(1u << to.part);
        uint8_t landed = b.parts_ok[to.block];
        if (++b.parts_done[to.block] == 2 && (landed == 1 || landed == 2)) {
          // One part landed, the other did not: take the landed one back so that the block is
          // absent, not half there.
          ++rollbacks;
          del_part(*to.n, b.blocks[to.block], landed == 1 ? 0 : 1);
        }
        break;
      }
      case op_kind::remove:
        if (r && r->type == REDIS_REPLY_INTEGER && r->integer > 0)
          ++removed;
        break;
    }
    if (--b.remaining == 0)
      answer(to.b);
  }

  void answer(const std::shared_ptr<batch>& bp) {
    batch& b = *bp;
    busy_ns += now_ns() - b.started_ns;
    ++batches;
    switch (b.what) {
      case op_kind::exists:
        b.on_exists(std::move(b.present));
        break;
      case op_kind::get:
        for (size_t i = 0; i < b.present.size(); ++i) {
          if (b.present[i]) {
            ++gets_hit;
            bytes_read += b.into[i].size;
          } else {
            ++gets_missed;
          }
        }
        b.on_get(std::move(b.present));
        break;
      case op_kind::put: {
        std::vector<bool> stored(b.blocks.size());
        for (size_t i = 0; i < stored.size(); ++i) {
          stored[i] = b.parts_ok[i] == 3;
          if (stored[i]) {
            ++puts_ok;
            bytes_written += b.payloads[i].size();
          } else {
            ++puts_failed;
          }
        }
        b.payloads.clear();
        b.on_put(std::move(stored));
        break;
      }
      case op_kind::remove:
        b.on_remove();
        break;
    }
  }

  // -- commands -------------------------------------------------------------------------------
  // Queues a command on node `n`; false (nothing queued) if the node is down.
  bool command(node& n, const std::shared_ptr<batch>& b, uint32_t block, uint8_t part,
               std::vector<std::string> words, const uint8_t* payload = nullptr,
               size_t payload_len = 0, size_t payload_at = 0) {
    if (!n.ctx)
      return false;
    n.waiting.push_back({b, block, part, std::move(words), payload, payload_len, payload_at});
    return true;
  }

  // Hands waiting commands to hiredis while its output buffer has room (see `queued`).
  void pump(node& n) {
    while (n.ctx && !n.waiting.empty() && sdslen(n.ctx->c.obuf) < buffer_limit) {
      queued q = std::move(n.waiting.front());
      n.waiting.pop_front();
      std::vector<const char*> argv;
      std::vector<size_t> len;
      for (size_t i = 0; i <= q.words.size(); ++i) {
        if (q.payload && i == q.payload_at) {
          argv.push_back(reinterpret_cast<const char*>(q.payload));
          len.push_back(q.payload_len);
        }
        if (i < q.words.size()) {
          argv.push_back(q.words[i].c_str());
          len.push_back(q.words[i].size());
        }
      }
      auto* to = new reply_to{this, q.b, q.block, q.part, &n};
      if (redisAsyncCommandArgv(n.ctx, on_reply, to, static_cast<int>(argv.size()), argv.data(),
                                len.data()) != REDIS_OK) {
        delete to;
        settle_unsent(n, q);
        continue;
      }
      if (n.pending++ == 0)
        n.last_progress = now_ns();
    }
    // A node that went down with commands still waiting: they fail.
    while (!n.ctx && !n.waiting.empty()) {
      queued q = std::move(n.waiting.front());
      n.waiting.pop_front();
      settle_unsent(n, q);
    }
  }

  void settle_unsent(node& n, queued& q) {
    reply_to to{this, q.b, q.block, q.part, &n};
    ++n.pending;  // settle() counts it back
    settle(to, nullptr);
  }

  // A part left by a rolled-back put. If the node is gone meanwhile, the part stays there alone:
  // never a block (both parts are asked for), overwritten by the block's next put.
  void del_part(node& n, const block_ref& ref, int part) {
    if (!n.ctx)
      return;
    std::string key = block_name(options.ns, ref.hash) + part_suffix[part];
    const char* argv[2] = {"DEL", key.c_str()};
    size_t len[2] = {3, key.size()};
    redisAsyncCommandArgv(n.ctx, nullptr, nullptr, 2, argv, len);
  }

  // Issues a batch's commands (all of them before the loop's next write: one pipeline per node).
  void dispatch(const std::shared_ptr<batch>& bp) {
    batch& b = *bp;
    size_t n_blocks = b.blocks.size();
    b.started_ns = now_ns();
    b.present.assign(n_blocks, false);
    b.parts_ok.assign(n_blocks, 0);
    b.parts_done.assign(n_blocks, 0);
    size_t issued = 0;
    b.remaining = 1;  // held until every command is out, so no reply answers early
    std::string ttl = std::to_string(options.redis_ttl_s);
    for (uint32_t i = 0; i < n_blocks; ++i) {
      node& n = *nodes[node_of_key(b.blocks[i].key, static_cast<uint32_t>(nodes.size()))];
      std::string name = block_name(options.ns, b.blocks[i].hash);
      std::string k = name + part_suffix[0], v = name + part_suffix[1];
      auto one = [&](const char* verb) {
        ++b.remaining;
        if (command(n, bp, i, 0, {verb, k, v}))
          ++issued;
        else
          --b.remaining;
      };
      switch (b.what) {
        case op_kind::exists:
          one("EXISTS");
          break;
        case op_kind::get:
          one("MGET");
          break;
        case op_kind::remove:
          one("DEL");
          break;
        case op_kind::put: {
          const block_bytes_t& p = b.payloads[i];
          size_t half = p.size() / 2;
          for (uint8_t part = 0; part < 2; ++part) {
            std::vector<std::string> words = {"SET", part == 0 ? k : v};
            if (options.redis_ttl_s > 0)
              words.insert(words.end(), {"EX", ttl});
            ++b.remaining;
            if (command(n, bp, i, part, std::move(words), p.data() + (part ? half : 0),
                        part ? p.size() - half : half, 2)) {
              ++issued;
            } else {
              --b.remaining;
              ++b.parts_done[i];
            }
          }
          break;
        }
      }
    }
    (void)issued;
    if (--b.remaining == 0)
      answer(bp);
  }

  // hiredis reads at most 16 KiB per call: while more has arrived, read on rather than poll again
  // for each 16 KiB of a megabyte reply.
  void read_available(node& n) {
    reading = &n;
    for (int round = 0; round < 1024 && n.ctx; ++round) {
      redisAsyncHandleRead(n.ctx);
      int queued = 0;
      if (!n.ctx || ::ioctl(n.ctx->c.fd, FIONREAD, &queued) != 0 || queued <= 0)
        break;
    }
    reading = nullptr;
  }

  // -- the I/O thread ---------------------------------------------------------------------------
  void run() {
    std::vector<pollfd> fds;
    std::vector<node*> polled;
    for (;;) {
      std::deque<std::shared_ptr<batch>> todo;
      {
        std::lock_guard<std::mutex> guard(mutex);
        if (stopping)
          break;
        todo.swap(submitted);
      }
      for (auto& b : todo)
        dispatch(b);
      for (auto& n : nodes)
        pump(*n);
      int64_t now = now_ns();
      int64_t wait_ns = 50 * ms;
      for (auto& n : nodes) {
        if (!n->ctx && n->retry_at <= now)
          dial(*n);
        else if (!n->ctx)
          wait_ns = std::min(wait_ns, n->retry_at - now);
        if (n->ctx && n->pending > 0 && now - n->last_progress > op_timeout_ns)
          redisAsyncFree(n->ctx);  // silent too long: down (its commands fail, cleanup runs)
      }
      fds.clear();
      polled.clear();
      fds.push_back({wake_fd, POLLIN, 0});
      for (auto& n : nodes) {
        if (!n->ctx)
          continue;
        short ev = static_cast<short>((n->want_read ? POLLIN : 0) | (n->want_write ? POLLOUT : 0));
        fds.push_back({n->ctx->c.fd, ev, 0});
        polled.push_back(n.get());
      }
      int timeout_ms = static_cast<int>(std::max<int64_t>(1, wait_ns / ms));
      if (::poll(fds.data(), fds.size(), timeout_ms) <= 0)
        continue;
      if (fds[0].revents & POLLIN) {
        uint64_t drained;
        ssize_t r = ::read(wake_fd, &drained, sizeof(drained));
        (void)r;
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        node* n = polled[i - 1];
        short re = fds[i].revents;
        if (n->ctx && (re & (POLLIN | POLLERR | POLLHUP)))
          read_available(*n);
        if (n->ctx && (re & POLLOUT))
          redisAsyncHandleWrite(n->ctx);
        pump(*n);
      }
    }
    // Stopping: every connection goes; commands still out complete as failures.
    for (auto& n : nodes)
      if (n->ctx)
        redisAsyncFree(n->ctx);
    for (auto& n : nodes)
      pump(*n);  // no connection: what still waits fails
    std::deque<std::shared_ptr<batch>> left;
    {
      std::lock_guard<std::mutex> guard(mutex);
      left.swap(submitted);
    }
    for (auto& b : left)
      dispatch(b);  // no connections: answers at once
  }
};

std::pair<std::string, int> parse_redis_address(const std::string& address) {
  auto colon = address.rfind(':');
  auto bad = [&] {
    return std::invalid_argument("storage.redis: '" + address + "': expected host:port");
  };
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
    throw bad();
  int port = 0;
  for (size_t i = colon + 1; i < address.size(); ++i) {
    if (address[i] < '0' || address[i] > '9')
      throw bad();
    port = port * 10 + (address[i] - '0');
    if (port > 65535)
      throw bad();
  }
  if (port == 0)
    throw bad();
  return {address.substr(0, colon), port};
}

redis_backend::redis_backend(const backend_options& o)
  : storage_backend(static_cast<uint32_t>(o.redis.size())), options_(o) {
  if (o.redis.empty())
    throw std::invalid_argument("storage.redis: the redis backend needs one host:port per node");
  loop_ = std::make_unique<loop>(options_);
  loop_->thread = std::thread([l = loop_.get()] { l->run(); });
  // Start with every node connected (a pool that begins with a node down is a set-up error).
  auto deadline = now_ns() + 2'000 * ms;
  while (now_ns() < deadline) {
    bool all = true;
    for (uint32_t n = 0; n < nodes(); ++n)
      all = all && node_up(n);
    if (all)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string down;
  for (uint32_t n = 0; n < nodes(); ++n)
    if (!node_up(n))
      down += (down.empty() ? "" : ", ") + o.redis[n];
  {
    std::lock_guard<std::mutex> guard(loop_->mutex);
    loop_->stopping = true;
  }
  loop_->wake();
  loop_->thread.join();
  throw std::runtime_error("storage.redis: cannot reach " + down);
}

redis_backend::~redis_backend() {
  for (auto& t : listers_)
    t.join();
  {
    std::lock_guard<std::mutex> guard(loop_->mutex);
    loop_->stopping = true;
  }
  loop_->wake();
  loop_->thread.join();
}

bool redis_backend::node_up(uint32_t n) const {
  return loop_->nodes.at(n)->up.load();
}

void redis_backend::exists(std::vector<block_ref> blocks, exists_done done) {
  auto b = std::make_shared<batch>();
  b->what = op_kind::exists;
  b->blocks = std::move(blocks);
  b->on_exists = std::move(done);
  loop_->submit(std::move(b));
}

void redis_backend::get(std::vector<block_ref> blocks, std::vector<block_span> into,
                        get_done done) {
  KVTIER_ASSERT(into.size() == blocks.size());
  auto b = std::make_shared<batch>();
  b->what = op_kind::get;
  b->blocks = std::move(blocks);
  b->into = std::move(into);
  b->on_get = std::move(done);
  loop_->submit(std::move(b));
}

void redis_backend::put(std::vector<block_ref> blocks, std::vector<block_bytes_t> payloads,
                        put_done done) {
  auto b = std::make_shared<batch>();
  b->what = op_kind::put;
  b->blocks = std::move(blocks);
  b->payloads = std::move(payloads);
  b->on_put = std::move(done);
  loop_->submit(std::move(b));
}

void redis_backend::remove(std::vector<block_ref> blocks, remove_done done) {
  auto b = std::make_shared<batch>();
  b->what = op_kind::remove;
  b->blocks = std::move(blocks);
  b->on_remove = std::move(done);
  loop_->submit(std::move(b));
}

// Listing walks each node with SCAN on its own blocking connection, on a thread of its own: it
// runs once, when a pool restarts, and must not hold up the I/O thread.
void redis_backend::list(list_done done) {
  listers_.emplace_back([this, done = std::move(done)] {
    std::vector<uint64_t> out;
    std::string pattern = block_name(options_.ns, 0);
    pattern = pattern.substr(0, pattern.size() - 16) + "*";
    for (const std::string& address : options_.redis) {
      auto [host, port] = parse_redis_address(address);
      timeval tv{2, 0};
      redisContext* c = redisConnectWithTimeout(host.c_str(), port, tv);
      if (!c || c->err) {
        if (c)
          redisFree(c);
        continue;  // a node that is down lists nothing: its blocks count as gone
      }
      redisSetTimeout(c, tv);
      absl::flat_hash_map<uint64_t, uint8_t> parts;
      std::string cursor = "0";
      do {
        auto* r = static_cast<redisReply*>(redisCommand(c, "SCAN %s MATCH %s COUNT 1000",
                                                         cursor.c_str(), pattern.c_str()));
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
          if (r)
            freeReplyObject(r);
          break;
        }
        cursor.assign(r->element[0]->str, r->element[0]->len);
        for (size_t i = 0; i < r->element[1]->elements; ++i) {
          std::string key(r->element[1]->element[i]->str, r->element[1]->element[i]->len);
          auto h = hash_of_block_name(options_.ns, key);
          if (!h || key.size() < 2)
            continue;
          std::string tail = key.substr(key.size() - 2);
          parts[*h] |= tail == part_suffix[0] ? 1 : tail == part_suffix[1] ? 2 : 0;
        }
        freeReplyObject(r);
      } while (cursor != "0");
      redisFree(c);
      for (const auto& [h, mask] : parts)
        if (mask == 3)  // a block counts only with both parts
          out.push_back(h);
    }
    done(std::move(out));
  });
}

backend_counters redis_backend::counters() const {
  const loop& l = *loop_;
  backend_counters c;
  c.puts_ok = l.puts_ok;
  c.puts_failed = l.puts_failed;
  c.gets_hit = l.gets_hit;
  c.gets_missed = l.gets_missed;
  c.rollbacks = l.rollbacks;
  c.bytes_written = l.bytes_written;
  c.bytes_read = l.bytes_read;
  c.removed = l.removed;
  c.node_downs = l.node_downs;
  c.reconnects = l.reconnects;
  c.busy_ns = l.busy_ns;
  c.batches = l.batches;
  c.corrupt = l.corrupt;
  return c;
}

}  // namespace kvtier
