#include "actors/device/gpu_compute.hpp"

#include <map>

namespace kvtier {

namespace {

struct gpu_compute_state {
  static inline const char* name = "gpu_compute";
  std::shared_ptr<compute_device> device;
  std::map<uint64_t, caf::typed_response_promise<compute_done>> steps;  // in flight, by step
};

using self_ptr = gpu_compute_actor::stateful_pointer<gpu_compute_state>;

gpu_compute_actor::behavior_type gpu_compute_behavior(self_ptr self,
                                                      std::shared_ptr<compute_device> device) {
  self->state.device = std::move(device);
  return {
    [=](compute_request& c) -> caf::result<compute_done> {
      auto& st = self->state;
      auto promise = self->make_response_promise<compute_done>();
      st.steps.emplace(c.step, promise);
      st.device->submit_compute(c.step, c.lead_ns, std::move(c.layer_ns), c.after_swap_in);
      return promise;
    },
    [=](gpu_done_atom, uint64_t op, int32_t) {
      auto& st = self->state;
      auto [step, stall] = st.device->compute_completed(op);
      auto it = st.steps.find(step);
      it->second.deliver(compute_done{step, true, stall, ""});
      st.steps.erase(it);
    },
  };
}

}  // namespace

gpu_compute_actor spawn_gpu_compute(caf::actor_system& sys,
                                    std::shared_ptr<compute_device> device) {
  return sys.spawn(gpu_compute_behavior, std::move(device));
}

}  // namespace kvtier
