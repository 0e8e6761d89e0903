#include "storage/memory_backend.hpp"

#include <cstring>

namespace kvtier {

memory_backend::memory_backend(uint32_t nodes) : storage_backend(nodes), nodes_(nodes) {}

void memory_backend::exists(std::vector<block_ref> blocks, exists_done done) {
  std::vector<bool> out(blocks.size());
  {
    std::lock_guard<std::mutex> guard(mutex_);
    for (size_t i = 0; i < blocks.size(); ++i)
      out[i] = nodes_[node_of_key(blocks[i].key, nodes())].contains(blocks[i].hash);
    ++counters_.batches;
  }
  done(std::move(out));
}

void memory_backend::get(std::vector<block_ref> blocks, std::vector<block_span> into,
                         get_done done) {
  std::vector<bool> out(blocks.size());
  {
    std::lock_guard<std::mutex> guard(mutex_);
    for (size_t i = 0; i < blocks.size(); ++i) {
      auto& node = nodes_[node_of_key(blocks[i].key, nodes())];
      auto it = node.find(blocks[i].hash);
      if (it == node.end() || it->second.size() != into[i].size) {
        counters_.corrupt += it != node.end();
        ++counters_.gets_missed;
        continue;
      }
      std::memcpy(into[i].data, it->second.data(), it->second.size());
      out[i] = true;
      ++counters_.gets_hit;
      counters_.bytes_read += it->second.size();
    }
    ++counters_.batches;
  }
  done(std::move(out));
}

void memory_backend::put(std::vector<block_ref> blocks, std::vector<block_bytes_t> payloads,
                         put_done done) {
  std::vector<bool> out(blocks.size(), true);
  {
    std::lock_guard<std::mutex> guard(mutex_);
    for (size_t i = 0; i < blocks.size(); ++i) {
      counters_.bytes_written += payloads[i].size();
      ++counters_.puts_ok;
      nodes_[node_of_key(blocks[i].key, nodes())][blocks[i].hash] = std::move(payloads[i]);
    }
    ++counters_.batches;
  }
  done(std::move(out));
}

void memory_backend::remove(std::vector<block_ref> blocks, remove_done done) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    for (const block_ref& b : blocks)
      counters_.removed += nodes_[node_of_key(b.key, nodes())].erase(b.hash);
  }
  done(std::vector<bool>(blocks.size(), true));
}

void memory_backend::list(list_done done) {
  block_listing out;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    for (const auto& node : nodes_)
      for (const auto& [hash, bytes] : node)
        out.blocks.push_back(hash);
  }
  out.listed.assign(nodes(), 1);
  done(std::move(out));
}

backend_counters memory_backend::counters() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return counters_;
}

}  // namespace kvtier
