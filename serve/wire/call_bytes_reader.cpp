// The frequent calls read straight from their bytes (call_readers.hpp): a cursor over the msgpack
// formats a client packs (https://github.com/msgpack/msgpack/blob/master/spec.md), each field
// stored where the object reader (decode_call.cpp) stores it. Anything this reader would have to
// judge, it declines instead: the object reader then reads the frame and words the error.

#include <cstring>
#include <limits>
#include <string_view>

#include "serve/wire/call_readers.hpp"

namespace kvtier::serve::wire {

namespace {

class byte_cursor {
 public:
  byte_cursor(const char* data, size_t size)
      : p_(reinterpret_cast<const uint8_t*>(data)), end_(p_ + size) {}

  bool at_end() const { return p_ == end_; }
  bool next_is_array() const {
    return p_ < end_ && (is_fixarray(*p_) || *p_ == 0xdc || *p_ == 0xdd);
  }

  // A count of entries each at least one byte long: no count can claim more than the frame holds.
  [[gnu::always_inline]] bool map_header(uint32_t& n) {
    if (p_ >= end_)
      return false;
    uint8_t t = *p_;
    if (t >= 0x80 && t <= 0x8f) {
      ++p_;
      n = t & 0x0f;
    } else if (!(t == 0xde ? big_endian<uint16_t>(n) : t == 0xdf && big_endian<uint32_t>(n))) {
      return false;
    }
    return n <= static_cast<size_t>(end_ - p_) / 2;
  }

  [[gnu::always_inline]] bool array_header(uint32_t& n) {
    if (p_ >= end_)
      return false;
    uint8_t t = *p_;
    if (is_fixarray(t)) {
      ++p_;
      n = t & 0x0f;
    } else if (!(t == 0xdc ? big_endian<uint16_t>(n) : t == 0xdd && big_endian<uint32_t>(n))) {
      return false;
    }
    return n <= static_cast<size_t>(end_ - p_);
  }

  [[gnu::always_inline]] bool str(std::string_view& s) {
    if (p_ >= end_)
      return false;
    uint8_t t = *p_;
    uint32_t n = 0;
    if (t >= 0xa0 && t <= 0xbf) {
      ++p_;
      n = t & 0x1f;
    } else if (!(t == 0xd9 ? big_endian<uint8_t>(n)
                 : t == 0xda ? big_endian<uint16_t>(n)
                             : t == 0xdb && big_endian<uint32_t>(n))) {
      return false;
    }
    if (n > static_cast<size_t>(end_ - p_))
      return false;
    s = {reinterpret_cast<const char*>(p_), n};
    p_ += n;
    return true;
  }

  // An unsigned integer in the formats a packer gives one (positive fixint, uint 8-64); a
  // signed format is left to the object reader, which reads its sign.
  [[gnu::always_inline]] bool uint(uint64_t& v) {
    if (p_ >= end_)
      return false;
    uint8_t t = *p_;
    if (t <= 0x7f) {
      ++p_;
      v = t;
      return true;
    }
    switch (t) {
      case 0xcc: return big_endian<uint8_t>(v);
      case 0xcd: return big_endian<uint16_t>(v);
      case 0xce: return big_endian<uint32_t>(v);
      case 0xcf: return big_endian<uint64_t>(v);
      default: return false;
    }
  }

  [[gnu::always_inline]] bool u32(uint32_t& v) {
    uint64_t wide = 0;
    if (!uint(wide) || wide > std::numeric_limits<uint32_t>::max())
      return false;
    v = static_cast<uint32_t>(wide);
    return true;
  }

  // A token id: any fixint, uint 8-32 up to int32's largest, int 8-32.
  [[gnu::always_inline]] bool i32(int32_t& v) {
    if (p_ >= end_)
      return false;
    uint8_t t = *p_;
    if (t <= 0x7f || t >= 0xe0) {
      ++p_;
      v = static_cast<int8_t>(t);
      return true;
    }
    uint64_t u = 0;
    switch (t) {
      case 0xcc: case 0xcd: case 0xce:
        if (!uint(u) || u > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
          return false;
        v = static_cast<int32_t>(u);
        return true;
      case 0xd0: return signed_big_endian<int8_t>(v);
      case 0xd1: return signed_big_endian<int16_t>(v);
      case 0xd2: return signed_big_endian<int32_t>(v);
      default: return false;
    }
  }

 private:
  static bool is_fixarray(uint8_t t) { return t >= 0x90 && t <= 0x9f; }

  // The format byte, then a big-endian T.
  template <class T, class Out>
  [[gnu::always_inline]] bool big_endian(Out& v) {
    if (static_cast<size_t>(end_ - p_) < 1 + sizeof(T))
      return false;
    T x;
    std::memcpy(&x, p_ + 1, sizeof x);
    p_ += 1 + sizeof(T);
    if constexpr (sizeof(T) == 2)
      x = __builtin_bswap16(x);
    else if constexpr (sizeof(T) == 4)
      x = __builtin_bswap32(x);
    else if constexpr (sizeof(T) == 8)
      x = __builtin_bswap64(x);
    v = static_cast<Out>(x);
    return true;
  }

  template <class T>
  bool signed_big_endian(int32_t& v) {
    using U = std::make_unsigned_t<T>;
    U u = 0;
    if (!big_endian<U>(u))
      return false;
    T s;
    std::memcpy(&s, &u, sizeof s);
    v = s;
    return true;
  }

  const uint8_t* p_;
  const uint8_t* end_;
};

template <class T, class Read>
bool read_list(byte_cursor& in, std::vector<T>& out, Read read) {
  uint32_t n = 0;
  if (!in.array_header(n))
    return false;
  out.clear();
  out.resize(n);
  for (uint32_t i = 0; i < n; ++i)
    if (!read(in, out[i]))
      return false;
  return true;
}

bool read_uints(byte_cursor& in, std::vector<uint64_t>& out) {
  return read_list(in, out, [](byte_cursor& c, uint64_t& v) { return c.uint(v); });
}

bool read_u32s(byte_cursor& in, std::vector<uint32_t>& out) {
  return read_list(in, out, [](byte_cursor& c, uint32_t& v) { return c.u32(v); });
}

// `[[req, tokens]]`, with `ids` a third element per entry allowed: the engine's device block ids.
bool read_marks(byte_cursor& in, std::vector<token_mark>& out,
                std::vector<std::vector<uint32_t>>* ids = nullptr) {
  uint32_t n = 0;
  if (!in.array_header(n))
    return false;
  out.assign(n, {});
  if (ids)
    ids->assign(n, {});
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t parts = 0;
    if (!in.array_header(parts) || !(parts == 2 || (ids && parts == 3)))
      return false;
    if (!in.uint(out[i].req) || !in.u32(out[i].tokens))
      return false;
    if (parts == 3 && !read_u32s(in, (*ids)[i]))
      return false;
  }
  return true;
}

bool set_form(prompt& p, prompt::form f) {
  if (p.kind != prompt::form::none)
    return false;
  p.kind = f;
  return true;
}

// The prompt's form, given once, and room for the `n` blocks its list announces.
bool start_block_list(byte_cursor& in, call& out, prompt::form f) {
  uint32_t n = 0;
  if (!set_form(out.text, f) || !in.array_header(n))
    return false;
  out.text.blocks.resize(n);
  return true;
}

bool read_prompt_blocks(byte_cursor& in, call& out) {
  if (!start_block_list(in, out, prompt::form::blocks))
    return false;
  for (cache_block& b : out.text.blocks) {
    uint32_t parts = 0;
    if (!in.array_header(parts) || parts != 2 || !in.uint(b.hash) || !in.u32(b.tokens)
        || b.tokens == 0)
      return false;
  }
  return true;
}

bool read_hashes(byte_cursor& in, call& out) {
  if (!start_block_list(in, out, prompt::form::hashes))
    return false;
  for (cache_block& b : out.text.blocks)
    if (!in.uint(b.hash))
      return false;
  return true;
}

bool read_token_ids(byte_cursor& in, call& out) {
  return set_form(out.text, prompt::form::tokens)
      && read_list(in, out.text.tokens, [](byte_cursor& c, int32_t& v) { return c.i32(v); });
}

bool read_session_key(std::string_view k, byte_cursor& in, call& out, seen_keys& seen) {
  std::string_view s;
  uint64_t v = 0;
  if (k == "op") {
    if (!in.str(s))
      return false;
    seen.op_name = std::string(s);
  } else if (k == "id") {
    if (!in.uint(out.id))
      return false;
  } else if (k == "token") {
    if (!in.str(s))
      return false;
    out.token = std::string(s);
  } else if (k == "engine") {
    if (!in.uint(v))
      return false;
    out.engine = v;
  } else {
    return false;
  }
  return true;
}

bool read_request_key(std::string_view k, byte_cursor& in, call& out, seen_keys& seen) {
  if (k == "tokens") {
    if (in.next_is_array())
      return read_token_ids(in, out);
    return seen.tokens_count = in.u32(out.tokens);
  }
  if (k == "blocks") {
    if (in.next_is_array())
      return read_prompt_blocks(in, out);
    return seen.blocks_count = in.u32(out.blocks);
  }
  if (k == "hashes") return read_hashes(in, out);
  if (k == "extra_keys") return read_uints(in, out.text.extra_keys);
  if (k == "req") return seen.req = in.uint(out.req);
  if (k == "repeats") return in.u32(out.repeats);
  if (k == "computed_tokens") return in.u32(out.computed_tokens);
  return false;
}

bool read_step_key(std::string_view k, byte_cursor& in, call& out, seen_keys& seen) {
  if (k == "step") {
    seen.step = in.uint(out.step.step);
    out.probe.step = out.step.step;
    return seen.step;
  }
  if (k == "computed") return read_marks(in, out.step.computed);
  if (k == "finished") return read_uints(in, out.step.finished);
  if (k == "preempted") return read_marks(in, out.step.preempted);
  if (k == "grows") return read_marks(in, out.step.grows, &out.step.grow_blocks);
  if (k == "admits") return read_marks(in, out.step.admits, &out.step.admit_blocks);
  if (k == "evicted") return read_uints(in, out.evicted);
  if (k == "candidates") return read_uints(in, out.probe.candidates);
  if (k == "grow_blocks") return in.u32(out.probe.grow_blocks);
  if (k == "victims") return read_uints(in, out.probe.victims);
  return false;
}

}  // namespace

bool read_call_bytes(const char* data, size_t size, call& out, seen_keys& seen) {
  byte_cursor in(data, size);
  uint32_t n = 0;
  if (!in.map_header(n))
    return false;
  for (uint32_t i = 0; i < n; ++i) {
    std::string_view k;
    if (!in.str(k))
      return false;
    // Each key belongs to one of the three: false from its own (a value declined) or from all
    // three (a key not read here) declines the frame.
    if (!read_session_key(k, in, out, seen) && !read_request_key(k, in, out, seen)
        && !read_step_key(k, in, out, seen))
      return false;
  }
  return in.at_end();
}

}  // namespace kvtier::serve::wire
