#include "actors/transfer_engine/cuda_copies.hpp"

#include "core/check.hpp"

namespace kvtier {

void cuda_copies::expect(const transfer& t) {
  if (static_cast<move_kind>(t.kind) == move_kind::swap_in)
    device_->expect_swap_in(t.id);  // a step's compute asking for it waits
}

void cuda_copies::start(const transfer& t) {
  uint64_t op = device_->submit_copy(t);
  running_.emplace(op, t);
}

void cuda_copies::on_device_event(uint64_t op, int32_t layer, copy_events& events) {
  auto it = running_.find(op);
  KVTIER_ASSERT(it != running_.end());
  if (layer >= 0) {
    events.layer_done(it->second.id);
    return;
  }
  transfer t = std::move(it->second);
  running_.erase(it);
  int64_t took = device_->copy_completed(op);
  bool swap_in = static_cast<move_kind>(t.kind) == move_kind::swap_in;
  events.copy_done(t.id, took, swap_in ? device_->check_arrived(t) : std::string{});
}

std::vector<payload_destination> cuda_copies::load_destinations(const transfer& t, uint64_t bytes) {
  KVTIER_ASSERT(bytes == device_->block_bytes());  // storage carries whole host blocks
  std::vector<payload_destination> out;
  for (const block_move& b : t.blocks)
    out.push_back(device_->host_destination(b.host_block));
  return out;
}

std::string cuda_copies::loaded(const transfer& t, uint64_t, bool found) {
  if (!found)
    return {};
  for (const block_move& b : t.blocks)
    if (std::string bad = device_->check_loaded(b); !bad.empty())
      return bad;
  return {};
}

}  // namespace kvtier
