#include "plugins.h"

#include <dlfcn.h>

#include "errors.h"

namespace cuco_harness {
namespace {

void* open(const std::string& path, const char* what) {
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    throw HarnessError(std::string("cannot load ") + what + " " + path + ": " + (e ? e : "unknown dlopen error"), false);
  }
  return h;
}

template <typename F>
F sym(void* h, const char* name, const std::string& path, bool required) {
  dlerror();
  void* p = dlsym(h, name);
  if (!p && required)
    throw HarnessError(std::string("missing symbol ") + name + " in " + path +
                           " (declare it extern \"C\" with the signature from cuco/abi.h)",
                       false);
  return reinterpret_cast<F>(p);
}

}  // namespace

WorkloadPlugin load_workload(const std::string& path) {
  void* h = open(path, "workload plugin");
  WorkloadPlugin w;
  w.describe = sym<cuco_workload_describe_fn>(h, CUCO_SYM_WORKLOAD_DESCRIBE, path, true);
  w.setup = sym<cuco_workload_setup_fn>(h, CUCO_SYM_WORKLOAD_SETUP, path, false);
  w.fill = sym<cuco_workload_fill_fn>(h, CUCO_SYM_WORKLOAD_FILL, path, true);
  w.check = sym<cuco_workload_check_fn>(h, CUCO_SYM_WORKLOAD_CHECK, path, true);
  w.parts = sym<cuco_workload_parts_fn>(h, CUCO_SYM_WORKLOAD_PARTS, path, false);
  w.teardown = sym<cuco_workload_teardown_fn>(h, CUCO_SYM_WORKLOAD_TEARDOWN, path, false);
  return w;
}

CandidatePlugin load_candidate(const std::string& path) {
  void* h = open(path, "candidate");
  CandidatePlugin c;
  c.requirements = sym<cuco_candidate_requirements_fn>(h, CUCO_SYM_CANDIDATE_REQUIREMENTS, path, true);
  c.setup = sym<cuco_candidate_setup_fn>(h, CUCO_SYM_CANDIDATE_SETUP, path, false);
  c.launch = sym<cuco_candidate_launch_fn>(h, CUCO_SYM_CANDIDATE_LAUNCH, path, true);
  c.teardown = sym<cuco_candidate_teardown_fn>(h, CUCO_SYM_CANDIDATE_TEARDOWN, path, false);
  return c;
}

}  // namespace cuco_harness
