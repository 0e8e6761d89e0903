#include "actors/transfer_engine/modelled_copies.hpp"

#include "actors/storage/payload_pattern.hpp"
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

void modelled_copies::start(const transfer& t) {
  uint64_t n = t.blocks.size();
  auto kind = static_cast<move_kind>(t.kind);
  if (kind == move_kind::swap_in) {
    uint64_t layer_bytes = block_bytes_ / layers_ * n;
    std::vector<link_model::op> ops(layers_, {links_.h2d_layer_latency_ns, layer_bytes});
    start_flow_(t.id, {h2d_, pcie_}, std::move(ops));
    return;
  }
  KVTIER_ASSERT(kind == move_kind::d2h);
  start_flow_(t.id, {d2h_, pcie_}, {{links_.d2h_latency_ns, block_bytes_ * n}});
}

std::vector<uint8_t> modelled_copies::storage_payload(const block_move& b, uint64_t bytes) {
  return pattern_payload(b.hash, bytes);
}

std::string modelled_copies::accept_payload(const block_move& b, uint64_t bytes,
                                            const std::vector<uint8_t>& payload) {
  return check_pattern_payload(b.hash, bytes, payload);
}

}  // namespace kvtier
