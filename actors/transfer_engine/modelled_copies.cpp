#include "actors/transfer_engine/modelled_copies.hpp"

#include "storage/payload_pattern.hpp"
#include "core/check.hpp"

namespace kvtier {

modelled_copies::modelled_copies(link_model& links, const transfer_engine_options& options,
                                 flow_starter start)
    : links_(options.links),
      layers_(options.layers),
      block_bytes_(options.block_bytes),
      start_flow_(std::move(start)) {
  h2d_ = links.add_link("h2d", links_.h2d_gbps);
  d2h_ = links.add_link("d2h", links_.d2h_gbps);
  pcie_ = links.add_link("pcie_duplex", links_.duplex_gbps);
}

std::unique_ptr<copy_backend> make_modelled_copies(const transfer_engine_options& options,
                                                   link_model& links, flow_starter start) {
  return std::make_unique<modelled_copies>(links, options, std::move(start));
}

void modelled_copies::start(const transfer& t) {
  uint64_t n = t.blocks.size();
  if (t.kind == transfer_kind::swap_in) {
    uint64_t layer_bytes = block_bytes_ / layers_ * n;
    std::vector<link_model::op> ops(layers_, {links_.h2d_layer_latency_ns, layer_bytes});
    start_flow_(t.id, {h2d_, pcie_}, std::move(ops));
    return;
  }
  KVTIER_ASSERT(is_d2h(t.kind));
  start_flow_(t.id, {d2h_, pcie_}, {{links_.d2h_latency_ns, block_bytes_ * n}});
}

std::vector<uint8_t> modelled_copies::storage_payload(const block_move& b, uint64_t bytes) {
  return pattern_payload(b.hash, bytes);
}

std::vector<payload_destination> modelled_copies::load_destinations(const transfer& t,
                                                                    uint64_t bytes) {
  auto& buffers = loading_[t.id];
  std::vector<payload_destination> out;
  for (size_t i = 0; i < t.blocks.size(); ++i) {
    if (spare_.empty() || spare_.back().size() != bytes) {
      buffers.emplace_back(bytes);
    } else {
      buffers.push_back(std::move(spare_.back()));
      spare_.pop_back();
    }
    out.push_back({reinterpret_cast<uint64_t>(buffers.back().data()), bytes});
  }
  return out;
}

std::string modelled_copies::loaded(const transfer& t, uint64_t bytes, bool found) {
  auto it = loading_.find(t.id);
  KVTIER_ASSERT(it != loading_.end() && it->second.size() == t.blocks.size());
  std::string bad;
  for (size_t i = 0; found && bad.empty() && i < t.blocks.size(); ++i)
    bad = check_pattern_payload(t.blocks[i].hash, bytes, it->second[i]);
  // Kept for the next loads, up to what a burst of them needs again.
  constexpr size_t keep = 64;
  for (auto& b : it->second)
    if (spare_.size() < keep)
      spare_.push_back(std::move(b));
  loading_.erase(it);
  return bad;
}

}  // namespace kvtier
