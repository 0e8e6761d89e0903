# Build speed: the sources a unity build compiles on their own (BENCHMARKS.md, "The first run").
#
# A unity build puts several sources of one target into one translation unit, so two of them
# may not define the same name in an anonymous namespace (or as static). KVTIER_UNITY_ALONE
# names the sources that do, by file name (so that the list holds while files move between
# folders); kvtier_unity_alone(), called once after every folder is added, marks them
# SKIP_UNITY_BUILD_INCLUSION in whichever target compiles them, so no folder's CMakeLists.txt
# has to know. A name that no target compiles is reported, to be taken off the list.
set(KVTIER_UNITY_ALONE
  # each actor's file: its own `self_ptr`, `fail`, `now_of` in an anonymous namespace
  front_end.cpp scheduler.cpp transfer_engine.cpp cache_controller.cpp gpu_compute.cpp
  storage_media.cpp remote_controller.cpp
  # the same small helper written twice (`median`, `measure`, `now_ns`, `max_u32`,
  # `bench_serve`)
  transfer_bench.cpp bench_storage_runs.cpp bench_serve_open.cpp redis_cluster_router.cpp
  redis_cluster_backend.cpp native_reader.cpp azure_reader.cpp
  # the TLS relay's state holds types of its anonymous namespace (`now_ns` is file_backend's too)
  redis_tls.cpp
  # a `using namespace` that would reach the files after it in a batch
  decode_call.cpp
  # a function named as a type of a header the next files include (`axis_value`, sweep_spec.hpp)
  results_tables.cpp
  # tests: fixtures and helpers of the same name in two files of one test binary, or in one
  # file and a test header (cache_harness.hpp) another file includes
  storage_pool_actor_test.cpp transfer_engine_test.cpp hit_accounting_test.cpp
  limits_cli_test.cpp report_test.cpp verify_pattern_test.cpp hostile_config_test.cpp
  preset_test.cpp cluster_replay_test.cpp
  fault_replay_test.cpp preemption_test.cpp storage_pressure_test.cpp native_test.cpp
  scheduler_core_test.cpp storage_traffic_test.cpp
)

# Targets compiled file by file: their sources open namespaces with `using namespace` at file
# level, which would reach the next file of a batch (kvtier_serve_tests: kvtier::serve's
# `prompt` against the test helpers' `prompt`).
set(KVTIER_UNITY_OFF_TARGETS kvtier_serve_tests)

function(kvtier_targets_in dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    kvtier_targets_in("${sub}" more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(kvtier_unity_alone)
  if(NOT CMAKE_UNITY_BUILD)
    return()
  endif()
  kvtier_targets_in("${PROJECT_SOURCE_DIR}" targets)
  set(unmatched ${KVTIER_UNITY_ALONE})
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "INTERFACE_LIBRARY" OR type STREQUAL "UTILITY")
      continue()
    endif()
    if(target IN_LIST KVTIER_UNITY_OFF_TARGETS)
      set_target_properties(${target} PROPERTIES UNITY_BUILD OFF)
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    get_target_property(source_dir ${target} SOURCE_DIR)
    foreach(source IN LISTS sources)
      get_filename_component(path "${source}" ABSOLUTE BASE_DIR "${source_dir}")
      get_filename_component(name "${path}" NAME)
      if(name IN_LIST KVTIER_UNITY_ALONE)
        set_source_files_properties("${path}" TARGET_DIRECTORY ${target}
                                    PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
        list(REMOVE_ITEM unmatched "${name}")
      endif()
    endforeach()
  endforeach()
  if(unmatched)
    message(WARNING "cmake/build_speed.cmake: KVTIER_UNITY_ALONE names sources no target "
                    "compiles: ${unmatched}")
  endif()
endfunction()
