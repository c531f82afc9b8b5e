// The NVSHMEM backend, harness side: the host library (libnvshmem_host.so.3, path from --nvshmem-lib) is opened at
// run time, brought up once per process with a unique id that rank 0 creates and the HostGroup carries, and gives
// symmetric workspaces (nvshmem_malloc). One PE per process: thread mode serves world 1 only.
#pragma once

#include <cstddef>
#include <string>

#include "group.h"

namespace cuco_harness {

class NvshmemHost {
 public:
  static NvshmemHost& instance();
  // Collective (every rank of the group, same order). "" once NVSHMEM is up here, else why it cannot be (missing
  // library, headers, a second PE in this process): the candidate is then "unsupported".
  std::string up(HostGroup& group, int rank, int world, int ranks_in_process, const std::string& lib_path);
  // Collective: symmetric memory (zeroed), and its release.
  void* malloc(size_t bytes);
  void free(void* p);
  const void* attr() const;
  void finalize();

 private:
  NvshmemHost() = default;
  bool up_ = false;
  std::string failed_;
};

}  // namespace cuco_harness
