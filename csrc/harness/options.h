// Command line of cuco-harness.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cuco_harness {

// The most graph replays one run may ask for (each replay refills, launches and checks once).
constexpr int kMaxGraphReplays = 100000;
// The most launches one timed iteration may hold (--launches-per-iteration).
constexpr int kMaxLaunchesPerIteration = 1000;

struct Options {
  std::string workload;                 // --workload W.so
  std::vector<std::string> candidates;  // --candidate C.so (repeatable, run in order)
  std::vector<int64_t> dims;            // --dims 8192,8192,8192
  int world = 0;                        // --world 2
  std::vector<int> devices;             // --devices 0,1 (default 0..world-1)
  std::vector<uint64_t> seeds{1, 2};    // --seeds 1,2
  bool verify = true;                   // --verify 1
  bool bench = true;                    // --bench 1
  int warmup = 5;                       // --warmup 5
  int iters = 30;                       // --iters 30
  bool parts = false;                   // --parts 1: time the workload's parts (the bound)
  double delay_comm_us = 0;             // --delay-comm-us: verified launches start the side stream this late
  double timeout_s = 120;               // --timeout-s: deadline of every phase
  double total_timeout_s = 0;           // --total-timeout-s: deadline of the process (0: derived)
  std::string out;                      // --out result.json
  int rank = -1;                        // --rank R: process mode, this process runs rank R only (-1: all, threads)
  std::string rendezvous;               // --rendezvous DIR: where process-mode ranks meet (needed with --rank)
  std::string nvshmem_lib;              // --nvshmem-lib PATH: libnvshmem_host.so.3 for NVSHMEM candidates
  std::string trace_dir;                // --trace DIR: after its timed runs, trace a few launches per candidate (CUPTI)
  double warm_ms = 0;                   // --warm-ms: before anything is timed, run the compute part this long
  int graph_replays = 0;                // --graph-replays N: capture one launch in a CUDA graph, replay and check N times
  int launches_per_iteration = 1;       // --launches-per-iteration N: each timed iteration is N back-to-back launches

  bool process_mode() const { return rank >= 0; }

  // The number of phases the watchdog may arm: bounds the process's lifetime.
  double derived_total_timeout_s() const;
};

// Parses argv; throws std::invalid_argument with a message naming the bad flag and the fix.
Options parse_options(int argc, char** argv);

std::string usage();

}  // namespace cuco_harness
