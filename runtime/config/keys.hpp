#pragma once

// Every config key, one header per section of configs/default.json; options.cpp assembles their
// rows into the one table `kvtier config` prints, in this order.

#include "runtime/config/cache_keys.hpp"
#include "runtime/config/storage_keys.hpp"
#include "runtime/config/trace_keys.hpp"
#include "runtime/config/scheduler_keys.hpp"
#include "runtime/config/compute_keys.hpp"
#include "runtime/config/links_keys.hpp"
#include "runtime/config/cluster_keys.hpp"
#include "runtime/config/router_keys.hpp"
#include "runtime/config/pd_keys.hpp"
#include "runtime/config/faults_keys.hpp"
#include "runtime/config/serve_keys.hpp"
#include "runtime/config/model_keys.hpp"
#include "runtime/config/gpu_keys.hpp"
#include "runtime/config/parallel_keys.hpp"
#include "runtime/config/preset_keys.hpp"
#include "runtime/config/output_keys.hpp"
#include "runtime/config/slo_keys.hpp"
