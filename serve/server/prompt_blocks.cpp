#include "serve/server/prompt_blocks.hpp"

#include "serve/server/block_names.hpp"

namespace kvtier::serve {

std::optional<std::string> prompt_blocks(const prompt& p, uint32_t block_size,
                                         uint64_t max_blocks, std::vector<cache_block>& out,
                                         std::vector<block_origin>* origins) {
  out.clear();
  auto keep_origins = [&] {
    if (!origins)
      return;
    origins->clear();
    for (size_t i = 0; i < out.size(); ++i) {
      block_origin o{out[i].hash, {}};
      if (p.kind == prompt::form::tokens)
        o.token_ids.assign(p.tokens.begin() + i * block_size,
                           p.tokens.begin() + (i + 1) * block_size);
      origins->push_back(std::move(o));
    }
  };
  if (p.kind == prompt::form::tokens) {
    uint64_t full = p.tokens.size() / block_size;
    if (full > max_blocks)
      return "the prompt has " + std::to_string(full) + " blocks, beyond "
             + std::to_string(max_blocks);
    block_hash parent = 0;
    for (uint64_t i = 0; i < full; ++i) {
      parent = hash_token_block(parent, p.tokens.data() + i * block_size, block_size,
                                p.extra_keys.data(), p.extra_keys.size());
      out.push_back({parent, block_size});
    }
    keep_origins();
    name_engine_blocks(out);
    return std::nullopt;
  }
  if (p.blocks.size() > max_blocks)
    return "the prompt has " + std::to_string(p.blocks.size()) + " blocks, beyond "
           + std::to_string(max_blocks);
  out = p.blocks;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].tokens == 0)
      out[i].tokens = block_size;
    else if (out[i].tokens > block_size || (out[i].tokens < block_size && i + 1 < out.size()))
      return "block " + std::to_string(i) + " holds " + std::to_string(out[i].tokens)
             + " tokens: blocks hold " + std::to_string(block_size)
             + ", only the last may hold fewer";
  }
  keep_origins();
  name_engine_blocks(out);
  return std::nullopt;
}

}  // namespace kvtier::serve
