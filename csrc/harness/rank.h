// One rank: its device, communicator, buffers and streams, and the life of every candidate on it.
// All ranks walk the same sequence of steps; every step that can fail ends in a host-side agreement
// (HostGroup::all_ok), so a failure on one rank never leaves another rank waiting in a collective.
#pragma once

#include <string>
#include <vector>

#include "cuco/abi.h"
#include "errors.h"
#include "group.h"
#include "options.h"
#include "plugins.h"
#include "report.h"
#include "watchdog.h"

namespace cuco_harness {

// What every rank of this process shares.
struct Shared {
  const Options& opts;
  const Launch& launch;
  HostGroup& group;
  Report& report;
  Watchdog& watchdog;
  const WorkloadPlugin& workload;
  const cuco_workload_desc& desc;
  std::vector<cuco_part> parts;
};

// A candidate's per-rank resources (workspaces, device communicator).
struct CandidateResources {
  void* workspace = nullptr;
  void* symmetric = nullptr;
  ncclWindow_t symmetric_window = nullptr;
  void* nvshmem = nullptr;  // NVSHMEM symmetric workspace
  bool devcomm = false;
};

class Rank {
 public:
  Rank(Shared& shared, LocalRank who);
  // The whole life of this rank: setup, parts, candidates, teardown.
  void run();

 private:
  // rank_setup.cpp
  void setup();
  void teardown();
  DeviceInfo device_info() const;
  void alloc_local(const cuco_requirements& req, CandidateResources& res);
  void register_symmetric(const cuco_requirements& req, CandidateResources& res);
  void create_devcomm(const cuco_requirements& req);
  std::string gin_unavailable_reason();
  void release(CandidateResources& res);

  // rank_run.cpp
  // Runs the workload's compute part (its first non-communication part) for opts.warm_ms on every rank, so the
  // first timed target does not meet a GPU at idle clocks; no communication, so ranks need no lockstep inside.
  void warm_up();
  void run_parts();
  void run_candidate(int index);
  bool verify(Target t, const CandidatePlugin& c);
  bool bench(Target t, cuco_candidate_launch_fn launch);
  // A few untimed launches under CUPTI; writes opts.trace_dir/candidate<index>[.rank<r>].json. Never fails the
  // candidate: a tracing problem is printed and skipped.
  void trace(Target t, cuco_candidate_launch_fn launch, int index);
  // rank_graph.cpp: capture one delayed launch in a CUDA graph and replay it opts.graph_replays times, each with
  // fresh inputs and a check on every rank. Records the candidate's graph record only, never its status.
  void graph_replay(Target t, const CandidatePlugin& c);
  // Captures one launch_joined(launch, untimed, delayed) on ctx_.stream; returns "" and the graph, or why the
  // launch could not be captured (the capture is ended on every path).
  std::string capture_launch(cuco_candidate_launch_fn launch, cudaGraph_t* graph);
  // Forks the side stream, launches, joins it back; returns "" or why the launch failed.
  // delayed: queue the delayed-arrival spin (opts.delay_comm_us) on the side stream before the launch.
  std::string launch_joined(cuco_candidate_launch_fn launch, bool timed, bool delayed = false);
  // One timed iteration: opts.launches_per_iteration launches back to back between start_ and stop_ (one launch:
  // launch_joined timed); "" or the first launch's failure (the rest are not enqueued).
  std::string launch_timed(cuco_candidate_launch_fn launch);
  // n untimed launches; every rank agrees before any waits (a rank whose launch failed enqueued nothing its peers'
  // kernels could wait for), then ctx_.stream is synchronised: "" or the first failure on any rank, on every rank.
  std::string launches_agreed(Target t, cuco_candidate_launch_fn launch, int n);
  void fill_and_poison(uint64_t seed);

  // Runs f; returns "" or the error's message. A sticky CUDA error ends the process as "crash".
  template <typename F>
  std::string attempt(Target t, F&& f);
  // True iff `err` is empty on every rank; otherwise the leader records `status` for t.
  bool agreed(Target t, const std::string& err, const std::string& status);
  void enter(Target t, const std::string& phase);
  // This rank's step in phase_, for a hang's message.
  void note(const std::string& step) { s_.watchdog.note(me_.rank, phase_, step, iteration_); }
  // Whether this rank writes its process's report: rank 0 in thread mode (one report for all), every rank in
  // process mode (one report per process; all ranks agree on every status, and times and checks are gathered).
  bool records() const { return me_.rank == 0 || s_.opts.process_mode(); }

  Shared& s_;
  LocalRank me_;
  std::string phase_;   // this rank's phase, as its watchdog notes name it ("candidate 2 bench")
  int agreements_ = 0;  // host agreements this rank reached in phase_
  int iteration_ = -1;  // the timed loop's iteration in phase_, -1 outside one
  cuco_ctx ctx_{};
  cudaEvent_t fork_ = nullptr, join_ = nullptr, start_ = nullptr, stop_ = nullptr;
};

template <typename F>
std::string Rank::attempt(Target /*t: the report's current target*/, F&& f) {
  try {
    f();
    return "";
  } catch (const HarnessError& e) {
    if (e.sticky()) {
      s_.report.fatal("crash", std::string("rank ") + std::to_string(me_.rank) + ": " + e.what(), 4);
    }
    return e.what();
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace cuco_harness
