#pragma once

// Redis Cluster's key placement, as its specification gives it: a key's hash slot is CRC16
// (XMODEM) of the key, or of its hash tag (the text between the first '{' and the next '}',
// when that is not empty), mod 16384; `CLUSTER SLOTS` says which node serves each slot range,
// and a node that does not serve a slot answers MOVED (the slot lives elsewhere now) or ASK
// (it is being migrated: ask there once, after ASKING). redis_cluster_backend.hpp says how the
// backend uses this.

#include <hiredis/hiredis.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvtier {

inline constexpr uint32_t cluster_slot_count = 16384;

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the checksum Redis Cluster hashes
/// keys with.
uint16_t crc16_xmodem(std::string_view bytes);

/// The hash slot of `key` (its hash tag's, if it has one).
uint32_t key_slot(std::string_view key);

/// Which node ("host:port") serves each slot; empty where none does.
class slot_map {
 public:
  slot_map() : owner_(cluster_slot_count) {}
  const std::string& owner(uint32_t slot) const { return owner_[slot]; }
  void assign(uint32_t first, uint32_t last, const std::string& address);
  /// Whether every slot has a node (a cluster whose slots are all served).
  bool complete() const;
  /// The nodes serving some slot, each once.
  std::vector<std::string> masters() const;

 private:
  std::vector<std::string> owner_;
};

/// The slot map a `CLUSTER SLOTS` reply describes; nullopt if the reply is not one. A node that
/// answers with an empty host (it does not know its own address) is named `asked_host`. Every
/// node the reply names, replicas too, is added to `nodes` (if given) unless already there.
std::optional<slot_map> parse_cluster_slots(const redisReply* reply, const std::string& asked_host,
                                            std::vector<std::string>* nodes = nullptr);

/// A MOVED or ASK error: where the slot's key should be asked instead.
struct cluster_redirect {
  enum class kind { moved, ask };
  kind what = kind::moved;
  uint32_t slot = 0;
  std::string address;
};

/// The redirect an error reply names ("MOVED 3999 127.0.0.1:6381"); nullopt for any other reply.
std::optional<cluster_redirect> parse_redirect(const redisReply* reply);

}  // namespace kvtier
