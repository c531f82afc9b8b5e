// How ranks find each other and agree on the host side.
//
// MULTI-NODE: this file and group.cpp are the one place to change. Today every rank is a thread of one
// process: `make_launch` creates the ncclUniqueId and lists all ranks as local, and `HostGroup` is a
// barrier plus an all-gather in shared memory. A multi-node launch (one process per node or per GPU,
// RANK / WORLD_SIZE / LOCAL_RANK from the launcher) replaces both: `make_launch` reads the environment,
// rank 0 writes the unique id to a file or env variable that the others read, and `HostGroup` becomes
// an all-gather across processes (a TCP store, or ncclAllGather on the host communicator). Candidates,
// the workload plugin, timing, verification and the watchdog use only this interface and stay unchanged.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nccl.h>

namespace cuco_harness {

struct LocalRank {
  int rank;        // global rank
  int local_rank;  // index on this host
  int device;      // CUDA ordinal
};

struct Launch {
  int world = 0;
  int local_world = 0;
  std::vector<LocalRank> local_ranks;  // the ranks this process runs, one thread each
  ncclUniqueId id{};
};

// Single-process launch: all `devices.size()` ranks in this process.
Launch make_launch(const std::vector<int>& devices);

// Host-side collectives among the ranks (every rank must call each one, in the same order).
class HostGroup {
 public:
  explicit HostGroup(int nranks);
  int size() const { return n_; }
  void barrier();
  // Every rank contributes a string; all receive all of them, indexed by rank.
  std::vector<std::string> allgather(int rank, const std::string& mine);
  // True iff every rank is ok; otherwise `why` gets "rank R: message" of the failing ranks.
  bool all_ok(int rank, bool ok, const std::string& message, std::string* why);
  // Element-wise maximum of an integer vector over ranks.
  std::vector<int64_t> max(int rank, const std::vector<int64_t>& mine);

 private:
  int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::vector<std::string> slots_;
};

}  // namespace cuco_harness
