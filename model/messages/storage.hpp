#pragma once

// The messages to the storage actor: a cache controller's exists queries, a transfer engine's gets
// and puts (docs/design.md, "Layout"). Plain structs of ids and integers, with no CAF: the
// CAF-free cores (model/) take and return them, and actors/messages.hpp gives them their inspect()
// overloads, type IDs and the actors' typed interfaces.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/messages/ids.hpp"

namespace kvtier {

// -- cache controller -> storage --------------------------------------------------------------------

struct exists_query {
  std::vector<uint64_t> keys;  ///< storage keys, in prompt order
};

struct exists_reply {
  uint32_t leading = 0;  ///< how many leading keys are stored
};

// -- transfer engine -> storage ------------------------------------------------------------------------

/// Where a get puts one block's bytes: `size` bytes of memory that the asking actor owns (a
/// host-tier block, a buffer of its own) and leaves alone until the get's reply. The one field of
/// the protocol that is not plain data: an address in this process, so storage requests that read
/// bytes never cross a process boundary (the storage actor runs beside the transfer engines that
/// ask it). It lets the backend read straight into the bytes' final place: no buffer per block is
/// allocated, filled, carried and copied again.
struct payload_destination {
  uint64_t address = 0;
  uint64_t size = 0;
};

/// Reads (get) or writes (put) blocks of `bytes_each` bytes; storage answers after its service
/// time. A get leases its keys until `storage_release`. With a byte-carrying storage backend
/// (storage.backend = memory | redis | file) `hashes` names each block in the backend, a put
/// carries each block's bytes in `payloads` and a get names where each block's bytes go in
/// `into`; with the modelled one all three stay empty.
struct storage_io {
  std::vector<uint64_t> keys;
  uint64_t bytes_each = 0;
  std::vector<uint64_t> hashes;                ///< block hash of each key
  std::vector<std::vector<uint8_t>> payloads;  ///< put: the bytes of each block
  std::vector<payload_destination> into;       ///< get: where each block's bytes go
};

struct storage_io_reply {
  uint32_t done = 0;   ///< keys found (get) or stored (put)
  uint64_t lease = 0;  ///< get: names the keys it leased, for storage_release
  /// get with a byte-carrying backend: per key, whether its bytes are in its `into` (exactly
  /// `into[i].size` of them); after a miss that memory holds nothing meaningful.
  std::vector<uint8_t> found;
};

/// A backend's answer to one storage request, as the storage actor posts it to itself.
struct storage_backend_done {
  uint64_t io = 0;
  /// exists: present; put: stored; get: read; remove: gone (per block); listing: per node,
  /// listed completely
  std::vector<uint8_t> ok;
  std::vector<uint64_t> listed;   ///< listing: the block hashes the backend holds whole
  std::vector<uint64_t> partial;  ///< listing: blocks of which only some parts are there
  /// When the backend finished, on the actor clock (its clock_type's ticks since its epoch);
  /// 0: not recorded.
  int64_t done_at = 0;
};

struct storage_release {
  uint64_t lease = 0;
};

}  // namespace kvtier
