#include "sim/report/provenance.hpp"

namespace kvtier {

nlohmann::json build_info_json(const build_info& b) {
  return {{"version", b.version}, {"commit", b.commit}, {"build_type", b.build_type},
          {"compiler", b.compiler}, {"cuda", b.cuda}};
}

}  // namespace kvtier
