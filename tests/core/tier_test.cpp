#include "core/tier.hpp"
#include "core/transfer_kind.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace kvtier;

TEST_CASE("tier: names and per-tier arrays follow the enum's order", "[core][tier]") {
  REQUIRE(all_tiers.size() == tier_count);
  for (size_t i = 0; i < tier_count; ++i)
    CHECK(index_of(all_tiers[i]) == i);
  CHECK(std::string(to_string(tier::device)) == "device");
  CHECK(std::string(to_string(tier::host)) == "host");
  CHECK(std::string(to_string(tier::storage)) == "storage");

  per_tier<uint64_t> hits{};
  at(hits, tier::storage) += 5;
  at(hits, tier::device) = 2;
  CHECK(hits == per_tier<uint64_t>{2, 0, 5});
  const per_tier<uint64_t>& read = hits;
  CHECK(at(read, tier::storage) == 5);
}

TEST_CASE("transfer_kind: backups and write-backs are the device -> host copies",
          "[core][transfer_kind]") {
  CHECK(is_d2h(transfer_kind::backup));
  CHECK(is_d2h(transfer_kind::write_back));
  CHECK_FALSE(is_d2h(transfer_kind::swap_in));
  CHECK(is_pcie(transfer_kind::swap_in));
  CHECK_FALSE(is_pcie(transfer_kind::load));
  CHECK_FALSE(is_pcie(transfer_kind::store));
  CHECK_FALSE(is_pcie(transfer_kind::fill));
  CHECK(std::string(to_string(transfer_kind::write_back)) == "write_back");
  per_transfer_kind<int> n{};
  ++at(n, transfer_kind::fill);
  CHECK(n[transfer_kind_count - 1] == 1);
}
