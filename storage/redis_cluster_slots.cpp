#include "storage/redis_cluster_slots.hpp"

#include <algorithm>
#include <cstdlib>

namespace kvtier {

uint16_t crc16_xmodem(std::string_view bytes) {
  uint16_t crc = 0;
  for (unsigned char byte : bytes) {
    crc ^= static_cast<uint16_t>(byte << 8);
    for (int bit = 0; bit < 8; ++bit)
      crc = static_cast<uint16_t>(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
  }
  return crc;
}

uint32_t key_slot(std::string_view key) {
  size_t open = key.find('{');
  if (open != std::string_view::npos) {
    size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1)
      key = key.substr(open + 1, close - open - 1);
  }
  return crc16_xmodem(key) % cluster_slot_count;
}

void slot_map::assign(uint32_t first, uint32_t last, const std::string& address) {
  for (uint32_t s = first; s <= last && s < cluster_slot_count; ++s)
    owner_[s] = address;
}

bool slot_map::complete() const {
  return std::none_of(owner_.begin(), owner_.end(), [](const auto& a) { return a.empty(); });
}

std::vector<std::string> slot_map::masters() const {
  std::vector<std::string> out;
  for (const std::string& a : owner_)
    if (!a.empty() && std::find(out.begin(), out.end(), a) == out.end())
      out.push_back(a);
  return out;
}

// Each element: [first slot, last slot, [master host, port, id...], [replica...]...].
std::optional<slot_map> parse_cluster_slots(const redisReply* reply, const std::string& asked_host,
                                            std::vector<std::string>* nodes) {
  if (!reply || reply->type != REDIS_REPLY_ARRAY)
    return std::nullopt;
  slot_map map;
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* range = reply->element[i];
    if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
        range->element[0]->type != REDIS_REPLY_INTEGER ||
        range->element[1]->type != REDIS_REPLY_INTEGER ||
        range->element[2]->type != REDIS_REPLY_ARRAY || range->element[2]->elements < 2)
      return std::nullopt;
    std::vector<std::string> served_by;  // the master first, then its replicas
    for (size_t n = 2; n < range->elements; ++n) {
      const redisReply* node = range->element[n];
      if (node->type != REDIS_REPLY_ARRAY || node->elements < 2 ||
          node->element[0]->type != REDIS_REPLY_STRING ||
          node->element[1]->type != REDIS_REPLY_INTEGER)
        return std::nullopt;
      std::string host(node->element[0]->str, node->element[0]->len);
      if (host.empty() || host == "?")
        host = asked_host;
      served_by.push_back(host + ":" + std::to_string(node->element[1]->integer));
    }
    map.assign(static_cast<uint32_t>(range->element[0]->integer),
               static_cast<uint32_t>(range->element[1]->integer), served_by.front());
    for (const std::string& a : served_by)
      if (nodes && std::find(nodes->begin(), nodes->end(), a) == nodes->end())
        nodes->push_back(a);
  }
  return map;
}

std::optional<cluster_redirect> parse_redirect(const redisReply* reply) {
  if (!reply || reply->type != REDIS_REPLY_ERROR || !reply->str)
    return std::nullopt;
  std::string text(reply->str, reply->len);
  cluster_redirect r;
  if (text.rfind("MOVED ", 0) == 0)
    r.what = cluster_redirect::kind::moved;
  else if (text.rfind("ASK ", 0) == 0)
    r.what = cluster_redirect::kind::ask;
  else
    return std::nullopt;
  size_t slot_at = text.find(' ') + 1;
  size_t address_at = text.find(' ', slot_at);
  if (address_at == std::string::npos)
    return std::nullopt;
  r.slot = static_cast<uint32_t>(std::strtoul(text.c_str() + slot_at, nullptr, 10));
  r.address = text.substr(address_at + 1);
  if (r.slot >= cluster_slot_count || r.address.empty())
    return std::nullopt;
  return r;
}

}  // namespace kvtier
