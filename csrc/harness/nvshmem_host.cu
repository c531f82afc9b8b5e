#include "nvshmem_host.h"

#include <dlfcn.h>

#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

#if __has_include(<nvshmemx.h>)
#include <nvshmemx.h>
#define CUCO_HAVE_NVSHMEM 1
#else
#define CUCO_HAVE_NVSHMEM 0
#endif

#include "errors.h"
#include "hexcode.h"

namespace cuco_harness {

#if CUCO_HAVE_NVSHMEM
namespace {

struct Api {
  int (*get_uniqueid)(nvshmemx_uniqueid_t*) = nullptr;
  int (*set_attr)(int, int, const nvshmemx_uniqueid_t*, nvshmemx_init_attr_t*) = nullptr;
  int (*hostlib_init)(unsigned int, nvshmemx_init_attr_t*) = nullptr;
  void (*hostlib_finalize)() = nullptr;
  void* (*malloc_)(size_t) = nullptr;
  void (*free_)(void*) = nullptr;
  void (*barrier_all)() = nullptr;
};
Api api;
nvshmemx_init_attr_t attr_ = NVSHMEMX_INIT_ATTR_INITIALIZER;

template <typename F>
bool sym(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}

// "" or why the library cannot be used.
std::string load(const std::string& path) {
  if (path.empty())
    return "no NVSHMEM host library was given (--nvshmem-lib): install nvidia-nvshmem-cu13 (pip), or set "
           "NVSHMEM_HOME";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);  // global: candidates' modules resolve against it
  if (!lib) return std::string("cannot load the NVSHMEM host library: ") + dlerror();
  if (!sym(lib, "nvshmemx_get_uniqueid", &api.get_uniqueid) ||
      !sym(lib, "nvshmemx_set_attr_uniqueid_args", &api.set_attr) ||
      !sym(lib, "nvshmemx_hostlib_init_attr", &api.hostlib_init) ||
      !sym(lib, "nvshmemx_hostlib_finalize", &api.hostlib_finalize) || !sym(lib, "nvshmem_malloc", &api.malloc_) ||
      !sym(lib, "nvshmem_free", &api.free_) || !sym(lib, "nvshmem_barrier_all", &api.barrier_all))
    return path + " lacks the host API this harness uses (nvshmemx_hostlib_init_attr, ...): install NVSHMEM >= 3";
  return "";
}

}  // namespace
#endif

NvshmemHost& NvshmemHost::instance() {
  static NvshmemHost h;
  return h;
}

std::string NvshmemHost::up(HostGroup& group, int rank, int world, int ranks_in_process, const std::string& lib) {
  if (up_) return "";
  if (!failed_.empty()) return failed_;
#if CUCO_HAVE_NVSHMEM
  std::string err = ranks_in_process > 1
                        ? "NVSHMEM runs one PE per process and this harness runs " + std::to_string(ranks_in_process) +
                              " ranks as threads: use process mode (HarnessRequest(mode=\"process\"))"
                        : load(lib);
  nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
  if (err.empty() && rank == 0 && api.get_uniqueid(&id) != 0) err = "nvshmemx_get_uniqueid failed";
  std::string why;
  if (!group.all_ok(rank, err.empty(), err, &why)) return failed_ = why;
  std::vector<std::string> ids = group.allgather(rank, rank == 0 ? to_hex(&id, sizeof id) : std::string());
  if (!from_hex(ids[0], &id, sizeof id)) err = "rank 0's NVSHMEM unique id arrived malformed";
  else if (api.set_attr(rank, world, &id, &attr_) != 0) err = "nvshmemx_set_attr_uniqueid_args failed";
  else if (api.hostlib_init(NVSHMEMX_INIT_WITH_UNIQUEID, &attr_) != 0) err = "nvshmemx_hostlib_init_attr failed";
  if (!group.all_ok(rank, err.empty(), err, &why)) return failed_ = "NVSHMEM did not come up: " + why;
  up_ = true;
  return "";
#else
  (void)group, (void)rank, (void)world, (void)ranks_in_process, (void)lib;
  return failed_ = "this harness was built without NVSHMEM headers (nvshmemx.h): install nvidia-nvshmem-cu13 and "
                   "clear the harness cache so it rebuilds";
#endif
}

void* NvshmemHost::malloc(size_t bytes) {
#if CUCO_HAVE_NVSHMEM
  if (!up_ || bytes == 0) return nullptr;
  void* p = api.malloc_(bytes);
  if (!p) throw HarnessError("nvshmem_malloc(" + std::to_string(bytes) + ") failed: raise NVSHMEM_SYMMETRIC_SIZE",
                             false);
  CUCO_CK(cudaMemset(p, 0, bytes));
  CUCO_CK(cudaDeviceSynchronize());
  api.barrier_all();  // every PE's workspace is zero before anyone writes into a peer's
  return p;
#else
  (void)bytes;
  return nullptr;
#endif
}

void NvshmemHost::free(void* p) {
#if CUCO_HAVE_NVSHMEM
  if (up_ && p) api.free_(p);
#else
  (void)p;
#endif
}

const void* NvshmemHost::attr() const {
#if CUCO_HAVE_NVSHMEM
  return up_ ? &attr_ : nullptr;
#else
  return nullptr;
#endif
}

void NvshmemHost::finalize() {
#if CUCO_HAVE_NVSHMEM
  if (up_) api.hostlib_finalize();
  up_ = false;
#endif
}

}  // namespace cuco_harness
