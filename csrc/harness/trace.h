// Timeline of a candidate's launches: CUPTI activity records (kernels, copies, memsets) of a few extra launches
// outside the timed ones, so tracing never touches a reported time. libcupti is opened at run time (dlopen):
// the harness builds and runs where CUPTI is absent, and only --trace asks for it.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace cuco_harness {

struct TraceRecord {
  std::string name;      // kernel name, or "memcpy DtoD" / "memcpy PtoP" / "memset"
  std::string kind;      // "kernel", "memcpy", "memset"
  int device = -1;       // CUDA ordinal
  uint32_t stream = 0;   // CUPTI stream id
  uint64_t start_ns = 0, end_ns = 0;
  uint64_t bytes = 0;    // copies and memsets
  bool peer = false;     // a copy between devices (or device-to-peer memory)
};

class Tracer {
 public:
  static Tracer& instance();
  // Loads libcupti and registers the buffers; "" or why tracing cannot run here.
  std::string load();
  // Start / stop collecting (process-wide: every rank thread's work is recorded).
  std::string start();
  std::string stop();
  // Flushes and drops what was collected so far (tracing stays on).
  void discard();
  // The records collected since the last take().
  std::vector<TraceRecord> take();

 private:
  Tracer() = default;
  void* lib_ = nullptr;
  std::mutex mu_;
  std::vector<TraceRecord> records_;
  friend struct TracerAccess;
};

// Writes `records` as JSON lines-free plain JSON: {"records": [...], "devices": {ordinal: rank}}.
std::string trace_json(const std::vector<TraceRecord>& records, const std::vector<std::pair<int, int>>& device_rank);

}  // namespace cuco_harness
