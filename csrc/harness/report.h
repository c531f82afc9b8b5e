// The result of one harness process and the only thing that counts: written as JSON atomically
// (temp file + rename) under one mutex, so the watchdog and the rank threads never interleave.
// A snapshot with status "running" is written at every phase change, so even a process killed from
// outside leaves a file that names the candidate and phase it died in.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "options.h"

namespace cuco_harness {

struct CheckRecord {
  uint64_t seed = 0;
  int rank = 0;
  bool passed = false;
  double max_abs_err = 0, rel_l2_err = 0;
  int64_t n_checked = 0, n_bad = 0, n_nan = 0;
  std::string message;
};

// CUDA-graph capture and replay of one candidate (--graph-replays N). status: "running" while in phase "graph";
// then passed | failed (a replay's check failed) | not_capturable (capture or instantiation failed) | error (a
// replay's fill, launch or sync failed) | hang | crash (the process ended in phase "graph"). Empty: not reached.
struct GraphRecord {
  std::string status;
  int failed_replay = -1;    // the first replay whose check failed (or that could not run), -1: none
  uint64_t failed_seed = 0;  // that replay's seed
  std::string reason;
};

// One timed thing: a candidate (name = path) or a workload part.
struct RunRecord {
  std::string name;
  int is_comm = 0;     // parts only
  std::string status;  // empty until decided: ok, verify_failed, hang, crash, error, unsupported, not_run
  std::string message;
  std::string phase;   // the phase the status was decided in (for failures)
  std::vector<CheckRecord> checks;
  std::vector<std::vector<double>> times_ms;  // per rank; empty when not benchmarked
  std::map<std::string, int64_t> requirements;
  GraphRecord graph;  // candidates only
};

struct DeviceInfo {
  std::string name;
  int sm_count = 0;
  std::string driver_version;        // CUDA driver API version, e.g. "13.0"
  std::string driver_release;        // kernel-module release, e.g. "580.159.04" (empty if unknown)
  std::string cuda_runtime_version;  // e.g. "13.0"
  std::string nccl_version;          // of the loaded library, e.g. "2.28.9"
  std::string nccl_header_version;   // the harness was compiled against
};

// What a status refers to.
struct Target {
  enum Kind { kHarness, kPart, kCandidate } kind = kHarness;
  int index = -1;
  static Target harness() { return {kHarness, -1}; }
  static Target part(int i) { return {kPart, i}; }
  static Target candidate(int i) { return {kCandidate, i}; }
};

class Report {
 public:
  explicit Report(const Options& opts);

  void set_device(const DeviceInfo& info);
  int add_part(const std::string& name, int is_comm);
  void set_phase(Target t, const std::string& phase);     // also writes a "running" snapshot
  std::string phase_label() const;                         // e.g. "candidate 2 (x.so): bench"
  // First failure wins: a later status never overwrites a failure already recorded.
  void set_status(Target t, const std::string& status, const std::string& message);
  std::string status(Target t);
  void add_check(int candidate, const CheckRecord& c);
  void set_times(Target t, int rank, const std::vector<double>& ms);
  void set_requirements(int candidate, const std::map<std::string, int64_t>& req);
  void set_graph(int candidate, const GraphRecord& g);
  void set_harness_message(const std::string& message);

  // Final JSON (top-level status "ok") once every candidate was reached.
  void finish();
  // Records `status` for the current target (unless it already failed), marks the rest not_run,
  // writes the JSON and ends the process at once with `exit_code`. Safe from any thread. In phase "graph" the
  // status goes to the candidate's graph record: the candidate had verified (and been timed) already.
  [[noreturn]] void fatal(const std::string& status, const std::string& message, int exit_code,
                          const std::string& top_status = "");

 private:
  RunRecord& record(Target t);
  void write_locked();
  std::string json_locked() const;

  const Options& opts_;
  mutable std::mutex mu_;
  DeviceInfo device_;
  std::string top_status_ = "running";
  std::string message_;
  std::string date_, hostname_;
  std::chrono::steady_clock::time_point start_;
  Target current_;
  std::string current_phase_ = "init";
  RunRecord harness_;
  std::vector<RunRecord> parts_;
  std::vector<RunRecord> candidates_;
  bool sealed_ = false;
};

}  // namespace cuco_harness
