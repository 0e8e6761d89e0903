// The call decoder's two readers against each other (serve/wire/call_readers.hpp): random calls
// of every verb, packed by the client's encoder (encode_call), then damaged at random (a byte
// changed, inserted or dropped, the frame cut short) or packed in formats a client does not use.
// decode_call, which reads the frequent calls from their bytes, must give what the object reader
// gives: the same call, or the same error.

#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "serve/wire/call.hpp"
#include "serve/wire/call_readers.hpp"
#include "serve/wire/map_writer.hpp"
#include "tests/serve/call_compare.hpp"

using namespace kvtier;
using namespace kvtier::serve;
using kvtier::serve::test::check_same;

namespace {

using rng = std::mt19937_64;

// Values of every width a packer picks: fixint, 8, 16, 32 and 64 bits.
uint64_t any_uint(rng& r) {
  switch (r() % 5) {
    case 0: return r() % 128;
    case 1: return r() % 256;
    case 2: return r() % 65536;
    case 3: return r() % (uint64_t{1} << 32);
    default: return r();
  }
}

uint32_t any_u32(rng& r) { return static_cast<uint32_t>(r() % 4 == 0 ? r() : any_uint(r)); }

std::vector<uint64_t> uints(rng& r, size_t most) {
  std::vector<uint64_t> out(r() % (most + 1));
  for (uint64_t& v : out)
    v = any_uint(r);
  return out;
}

std::vector<token_mark> marks(rng& r, size_t most) {
  std::vector<token_mark> out(r() % (most + 1));
  for (token_mark& m : out)
    m = {any_uint(r), any_u32(r)};
  return out;
}

// Block id lists for each mark, or none (the encoder then packs two-element entries).
std::vector<std::vector<uint32_t>> ids_for(rng& r, size_t n) {
  std::vector<std::vector<uint32_t>> out;
  if (r() % 2 == 0)
    return out;
  out.resize(n);
  for (auto& list : out) {
    list.resize(r() % 40);
    for (uint32_t& id : list)
      id = any_u32(r);
  }
  return out;
}

void random_prompt(rng& r, prompt& p) {
  switch (r() % 3) {
    case 0:
      p.kind = prompt::form::tokens;
      p.tokens.resize(r() % 300);
      for (int32_t& t : p.tokens)
        t = static_cast<int32_t>(r() % 3 == 0 ? r() : r() % 200 - 40);
      if (r() % 3 == 0)
        p.extra_keys = uints(r, 4);
      return;
    case 1:
      p.kind = prompt::form::hashes;
      p.blocks.resize(r() % 50);
      for (cache_block& b : p.blocks)
        b = {any_uint(r), 0};
      return;
    default:
      p.kind = prompt::form::blocks;
      p.blocks.resize(r() % 50);
      for (cache_block& b : p.blocks)
        b = {any_uint(r), 1 + any_u32(r) % 64};
  }
}

call random_call(rng& r) {
  static const verb verbs[] = {verb::lookup, verb::allocate, verb::wait, verb::probe,
                               verb::step, verb::commit, verb::save, verb::free,
                               verb::preempt, verb::finish, verb::stats, verb::ping,
                               verb::bye, verb::bench_swap};
  call c;
  c.op = verbs[r() % std::size(verbs)];
  c.id = any_uint(r);
  if (r() % 2)
    c.engine = any_uint(r);
  if (r() % 4 == 0)
    c.token = std::string(r() % 40, 'k');
  c.req = any_uint(r);
  c.tokens = any_u32(r);
  c.blocks = 1 + any_u32(r) % 4096;
  c.repeats = 1 + r() % 1000;
  if (r() % 2)
    c.computed_tokens = any_u32(r);
  if (c.op == verb::lookup || c.op == verb::allocate)
    random_prompt(r, c.text);
  c.probe.step = c.step.step = any_uint(r);
  c.probe.candidates = uints(r, 8);
  c.probe.grow_blocks = any_u32(r);
  c.probe.victims = uints(r, 8);
  c.step.computed = marks(r, 6);
  c.step.finished = uints(r, 6);
  c.step.preempted = marks(r, 3);
  c.step.grows = marks(r, 6);
  c.step.grow_blocks = ids_for(r, c.step.grows.size());
  c.step.admits = marks(r, 6);
  c.step.admit_blocks = ids_for(r, c.step.admits.size());
  if (r() % 2)
    c.evicted = uints(r, 10);
  return c;
}

// One random change to the frame's bytes: set, insert or drop a byte, or cut the frame short.
void damage(rng& r, std::string& bytes) {
  if (bytes.empty())
    return;
  size_t at = r() % bytes.size();
  switch (r() % 4) {
    case 0: bytes[at] = static_cast<char>(r()); return;
    case 1: bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(at), static_cast<char>(r())); return;
    case 2: bytes.erase(at, 1); return;
    default: bytes.resize(at);
  }
}

struct tally {
  int from_bytes = 0, agreed_errors = 0, agreed_calls = 0;
};

// decode_call against the object reader on one frame.
void check_readers_agree(const std::string& bytes, tally& t) {
  call fast, objects;
  std::optional<wire_error> e1 = decode_call(bytes.data(), bytes.size(), fast);
  std::optional<wire_error> e2 = wire::decode_call_objects(bytes.data(), bytes.size(), objects);
  REQUIRE(e1.has_value() == e2.has_value());
  CHECK(fast.id == objects.id);
  CHECK(fast.op_given == objects.op_given);
  if (e1) {
    CHECK(e1->kind == e2->kind);
    CHECK(e1->message == e2->message);
    ++t.agreed_errors;
  } else {
    check_same(fast, objects);
    ++t.agreed_calls;
  }
  call scratch;
  wire::seen_keys seen;
  if (wire::read_call_bytes(bytes.data(), bytes.size(), scratch, seen))
    ++t.from_bytes;
}

std::string packed(const call& c) {
  msgpack::sbuffer buf;
  encode_call(buf, c);
  return std::string(buf.data(), buf.size());
}

}  // namespace

TEST_CASE("the byte reader takes every frequent call encode_call packs, as the objects read it",
          "[serve][codec]") {
  rng r(20261129);
  tally t;
  int frames = 0;
  for (int i = 0; i < 3000; ++i) {
    call c = random_call(r);
    check_readers_agree(packed(c), t);
    ++frames;
  }
  INFO("read from bytes " << t.from_bytes << " of " << frames);
  // None of these verbs carries a key the byte reader leaves to the objects.
  CHECK(t.from_bytes == frames);
  CHECK(t.agreed_calls == frames);
}

TEST_CASE("damaged frames: the byte reader declines, or reads what the objects read",
          "[serve][codec]") {
  rng r(7);
  tally t;
  const int frames = 20000;
  for (int i = 0; i < frames; ++i) {
    std::string bytes = packed(random_call(r));
    int changes = 1 + static_cast<int>(r() % 3);
    for (int k = 0; k < changes; ++k)
      damage(r, bytes);
    check_readers_agree(bytes, t);
  }
  INFO("errors " << t.agreed_errors << ", calls " << t.agreed_calls << ", from bytes "
                 << t.from_bytes);
  // Both outcomes occur, and some damaged frames still read (a changed value, say).
  CHECK(t.agreed_errors > frames / 10);
  CHECK(t.agreed_calls > frames / 100);
  CHECK(t.from_bytes > frames / 100);
}

TEST_CASE("formats a client does not pack go to the object reader", "[serve][codec]") {
  tally t;
  // {op, id, then one more key whose value `pack_value` packs}.
  auto frame = [](const char* op, int id, const char* key, auto pack_value) {
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    pk.pack_map(3);
    pk.pack(std::string("op"));
    pk.pack(std::string(op));
    pk.pack(std::string("id"));
    pk.pack(id);
    pk.pack(std::string(key));
    pack_value(pk);
    return std::string(buf.data(), buf.size());
  };
  // `req` as a signed 64-bit 5, and as -1: a signed format is the objects' to read.
  std::string signed_req = frame("wait", 1, "req", [](auto& pk) { pk.pack_fix_int64(5); });
  std::string negative_req = signed_req;
  negative_req.replace(negative_req.size() - 8, 8, std::string(8, '\xff'));
  // A key of a later version (ignored by the objects) and hello's keys: declined, then read.
  std::string later_key =
    frame("ping", 2, "priority", [](auto& pk) { pk.pack(std::vector<double>{0.5}); });
  call hello;
  hello.op = verb::hello;
  hello.versions = {1, 3};
  hello.model = {"m", 2, 2, 64, "bf16"};
  hello.block_size = 16;
  std::string hello_frame = packed(hello);
  // Token ids are int32s (docs/protocol.md), so signed formats are a client's own there: the
  // bytes read them, a negative one too.
  std::string signed_tokens = frame("lookup", 3, "tokens", [](auto& pk) {
    pk.pack_array(2);
    pk.pack_fix_int32(70000);
    pk.pack_fix_int8(-3);
  });
  std::string positive_tokens = frame("lookup", 4, "tokens", [](auto& pk) {
    pk.pack_array(2);
    pk.pack_fix_int32(70000);
    pk.pack_fix_int8(3);
  });
  for (const std::string* f :
       {&signed_req, &negative_req, &later_key, &hello_frame, &signed_tokens, &positive_tokens})
    check_readers_agree(*f, t);
  INFO("errors " << t.agreed_errors << ", calls " << t.agreed_calls);
  CHECK(t.from_bytes == 2);     // only the token frames
  CHECK(t.agreed_calls == 5);   // all but -1 as a request id
  CHECK(t.agreed_errors == 1);
}
