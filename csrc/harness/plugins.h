// Loading the workload plugin and candidates (dlopen RTLD_NOW | RTLD_LOCAL) and resolving their ABI.
// Shared objects are never dlclose'd: unloading a module with registered kernels while CUDA contexts
// live is fragile, and one harness process loads only a handful.
#pragma once

#include <string>
#include <vector>

#include "cuco/abi.h"

namespace cuco_harness {

struct WorkloadPlugin {
  cuco_workload_describe_fn describe = nullptr;
  cuco_workload_setup_fn setup = nullptr;        // optional
  cuco_workload_fill_fn fill = nullptr;
  cuco_workload_check_fn check = nullptr;
  cuco_workload_parts_fn parts = nullptr;        // optional
  cuco_workload_teardown_fn teardown = nullptr;  // optional
};

struct CandidatePlugin {
  cuco_candidate_requirements_fn requirements = nullptr;
  cuco_candidate_setup_fn setup = nullptr;        // optional
  cuco_candidate_launch_fn launch = nullptr;
  cuco_candidate_teardown_fn teardown = nullptr;  // optional
};

// Both throw HarnessError with the dlerror() text or the missing symbol's name.
WorkloadPlugin load_workload(const std::string& path);
CandidatePlugin load_candidate(const std::string& path);

}  // namespace cuco_harness
