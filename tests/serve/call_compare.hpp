#pragma once

// Two decoded calls compared field by field, every field a call of any verb may carry
// (codec_calls_test.cpp, codec_readers_test.cpp).

#include <catch2/catch.hpp>

#include <vector>

#include "serve/wire/call.hpp"

namespace kvtier::serve::test {

inline void check_same(const std::vector<token_mark>& a, const std::vector<token_mark>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].req == b[i].req);
    CHECK(a[i].tokens == b[i].tokens);
  }
}

// Entry i's device block ids; an entry without any has an empty list, as the decoder gives it.
inline std::vector<uint32_t> ids_at(const std::vector<std::vector<uint32_t>>& lists, size_t i) {
  return i < lists.size() ? lists[i] : std::vector<uint32_t>{};
}

inline void check_same_step(const call& a, const call& b) {
  CHECK(a.step.step == b.step.step);
  check_same(a.step.computed, b.step.computed);
  CHECK(a.step.finished == b.step.finished);
  check_same(a.step.preempted, b.step.preempted);
  check_same(a.step.grows, b.step.grows);
  check_same(a.step.admits, b.step.admits);
  for (size_t i = 0; i < a.step.grows.size(); ++i)
    CHECK(ids_at(a.step.grow_blocks, i) == ids_at(b.step.grow_blocks, i));
  for (size_t i = 0; i < a.step.admits.size(); ++i)
    CHECK(ids_at(a.step.admit_blocks, i) == ids_at(b.step.admit_blocks, i));
  CHECK(a.evicted == b.evicted);
}

inline void check_same_hello(const call& a, const call& b) {
  CHECK(a.versions == b.versions);
  CHECK(a.name == b.name);
  CHECK(a.model.name == b.model.name);
  CHECK(a.model.layers == b.model.layers);
  CHECK(a.model.kv_heads == b.model.kv_heads);
  CHECK(a.model.head_dim == b.model.head_dim);
  CHECK(a.model.kv_dtype == b.model.kv_dtype);
  CHECK(a.block_size == b.block_size);
  CHECK(a.tiers == b.tiers);
  CHECK(a.config == b.config);
  CHECK(a.tensors.present == b.tensors.present);  // not part of attach_request's ==
  CHECK(a.model.latent_dim == b.model.latent_dim);
  CHECK(a.model.kv_lora_rank == b.model.kv_lora_rank);
  CHECK(a.model.rope_head_dim == b.model.rope_head_dim);
  CHECK(a.tensors == b.tensors);
}

// Every field a call of any verb may carry.
inline void check_same(const call& a, const call& b) {
  CHECK(a.op == b.op);
  CHECK(a.id == b.id);
  CHECK(a.token == b.token);
  CHECK(a.engine == b.engine);
  check_same_hello(a, b);
  CHECK(a.blocks == b.blocks);
  CHECK(a.repeats == b.repeats);
  CHECK(a.text.kind == b.text.kind);
  CHECK(a.text.tokens == b.text.tokens);
  CHECK(a.text.extra_keys == b.text.extra_keys);
  REQUIRE(a.text.blocks.size() == b.text.blocks.size());
  for (size_t i = 0; i < a.text.blocks.size(); ++i) {
    CHECK(a.text.blocks[i].hash == b.text.blocks[i].hash);
    CHECK(a.text.blocks[i].tokens == b.text.blocks[i].tokens);
  }
  CHECK(a.computed_tokens == b.computed_tokens);
  CHECK(a.req == b.req);
  CHECK(a.tokens == b.tokens);
  CHECK(a.probe.candidates == b.probe.candidates);
  CHECK(a.probe.grow_blocks == b.probe.grow_blocks);
  CHECK(a.probe.victims == b.probe.victims);
  check_same_step(a, b);
}

}  // namespace kvtier::serve::test
