#include "observe/metrics/build_info_metric.hpp"

namespace kvtier {

void add_build_info_metric(metrics_registry& r, const build_info& b) {
  r.add_gauge("kvtier_build_info", "The server's build: always 1, its labels name it.",
              {{"version", b.version}, {"commit", b.commit}, {"build_type", b.build_type},
               {"compiler", b.compiler}, {"cuda", b.cuda}})
    .set(1);
}

}  // namespace kvtier
