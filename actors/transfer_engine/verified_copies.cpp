#include "actors/transfer_engine/verified_copies.hpp"

namespace kvtier {

// The wrapped backend's reports, with each finished swap-in's blocks checked on the way.
class verified_copies::checked_events : public copy_events {
 public:
  checked_events(verified_copies& owner, copy_events& engine) : owner_(owner), engine_(engine) {}
  void layer_done(uint64_t transfer) override { engine_.layer_done(transfer); }
  void copy_done(uint64_t transfer, int64_t measured_ns, const std::string& error) override {
    std::string bad = error;
    if (auto it = owner_.swap_ins_.find(transfer); it != owner_.swap_ins_.end()) {
      if (bad.empty())
        bad = owner_.memory_.check_device(it->second);
      owner_.swap_ins_.erase(it);
    }
    engine_.copy_done(transfer, measured_ns, bad);
  }

 private:
  verified_copies& owner_;
  copy_events& engine_;
};

verified_copies::verified_copies(std::unique_ptr<copy_backend> inner, block_memory& memory,
                                 uint64_t payload_limit_bytes)
    : inner_(std::move(inner)), memory_(memory), payload_limit_bytes_(payload_limit_bytes) {}

void verified_copies::expect(const transfer& t) {
  if (t.kind == transfer_kind::swap_in)
    swap_ins_.emplace(t.id, t);
  inner_->expect(t);
}

void verified_copies::on_device_event(uint64_t op, int32_t layer, copy_events& events) {
  checked_events checked(*this, events);
  inner_->on_device_event(op, layer, checked);
}

std::string verified_copies::loaded(const transfer& t, uint64_t bytes, bool found) {
  std::string bad = inner_->loaded(t, bytes, found);
  for (size_t i = 0; found && bad.empty() && i < t.blocks.size(); ++i)
    if (std::string wrong = memory_.check_host(t.blocks[i]); !wrong.empty())
      bad = "after a storage read: " + wrong;
  return bad;
}

std::string verified_copies::before_store(const transfer& t) {
  for (const block_move& b : t.blocks) {
    std::vector<uint8_t> bytes = memory_.read_host(b.host_block);
    auto& copy = stored_[b.storage_key];
    if (copy.empty()) {
      stored_bytes_ += bytes.size();
      if (stored_bytes_ > payload_limit_bytes_)
        return "verify: storage payloads exceed " + std::to_string(payload_limit_bytes_)
               + " bytes; replay fewer blocks with --verify";
    }
    copy = std::move(bytes);
  }
  return {};
}

std::string verified_copies::after_load(const transfer& t) {
  for (const block_move& b : t.blocks) {
    auto it = stored_.find(b.storage_key);
    if (it == stored_.end())
      return "verify: storage read block " + std::to_string(b.hash) + " that was never stored";
    memory_.write_host(b.host_block, it->second);
    if (std::string wrong = memory_.check_host(b); !wrong.empty())
      return "after a storage read: " + wrong;
  }
  return {};
}

}  // namespace kvtier
