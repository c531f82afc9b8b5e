// How ranks find each other and agree on the host side.
//
// Two launches, one interface. Thread mode (default): every rank is a thread of one process, `make_launch`
// creates the ncclUniqueId and `HostGroup` is a barrier plus an all-gather in shared memory. Process mode
// (`--rank R --rendezvous DIR`, one process per rank, started by cuco.harness.ranks): `make_process_launch`
// joins a StarLink (star.h), which carries the unique id and every host-side exchange over loopback TCP.
// Candidates, the workload plugin, timing, verification and the watchdog use only this interface.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include <nccl.h>

#include "star.h"

namespace cuco_harness {

struct LocalRank {
  int rank;        // global rank
  int local_rank;  // index on this host
  int device;      // CUDA ordinal
};

struct Launch {
  int world = 0;
  int local_world = 0;                 // ranks on this host
  std::vector<LocalRank> local_ranks;  // the ranks this process runs, one thread each
  ncclUniqueId id{};
};

// Single-process launch: all `devices.size()` ranks in this process.
Launch make_launch(const std::vector<int>& devices);
// Process-per-rank launch: this process runs rank `rank` of `devices.size()` on devices[rank]; `link` must
// already be joined (it holds the unique id).
Launch make_process_launch(const std::vector<int>& devices, int rank, const ncclUniqueId& id);

// Host-side collectives among the ranks (every rank must call each one, in the same order).
class HostGroup {
 public:
  explicit HostGroup(int nranks);
  // Process mode: the exchanges go through `link` (this process holds one rank).
  HostGroup(int nranks, std::unique_ptr<StarLink> link);
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
  std::unique_ptr<StarLink> link_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::vector<std::string> slots_;
};

}  // namespace cuco_harness
