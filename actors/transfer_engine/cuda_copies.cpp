#include "actors/transfer_engine/cuda_copies.hpp"

#include "core/check.hpp"

namespace kvtier {

void cuda_copies::expect(const transfer& t) {
  if (t.kind == transfer_kind::swap_in)
    device_->expect_swap_in(t.id);  // a step's compute asking for it waits
}

void cuda_copies::start(const transfer& t) {
  uint64_t op = device_->submit_copy(t);
  running_.emplace(op, t.id);
}

void cuda_copies::on_device_event(uint64_t op, int32_t layer, copy_events& events) {
  auto it = running_.find(op);
  KVTIER_ASSERT(it != running_.end());
  if (layer >= 0) {
    events.layer_done(it->second);
    return;
  }
  uint64_t id = it->second;
  running_.erase(it);
  int64_t took = device_->copy_completed(op);
  events.copy_done(id, took, {});
}

std::vector<payload_destination> cuda_copies::load_destinations(const transfer& t, uint64_t bytes) {
  KVTIER_ASSERT(bytes == device_->block_bytes());  // storage carries whole host blocks
  std::vector<payload_destination> out;
  for (const block_move& b : t.blocks)
    out.push_back(device_->host_destination(b.host_block));
  return out;
}

void use_cuda_copies(transfer_engine_options& o, std::shared_ptr<cuda_device> gpu,
                     copy_checks checks) {
  o.gpu = gpu;
  o.block_bytes = gpu->block_bytes();
  o.copies = [gpu, checks](const transfer_engine_options&, link_model&,
                           flow_starter) -> std::unique_ptr<copy_backend> {
    auto copies = std::make_unique<cuda_copies>(gpu);
    if (checks == copy_checks::none)
      return copies;
    block_memory& blocks = *copies;
    return std::make_unique<verified_copies>(std::move(copies), blocks);
  };
}

}  // namespace kvtier
