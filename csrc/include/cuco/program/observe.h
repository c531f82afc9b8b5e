// cuco program harness: what the harness observes of a user's whole program, compiled into the reference (the
// original host program) and into every candidate alike.
//
// - Read-backs: every device-to-host cudaMemcpy / cudaMemcpyAsync is recorded (device, per-device sequence
//   number, bytes). They are the program's outputs; a candidate must read back what the reference reads back.
//   An asynchronous read-back waits for its stream before it is recorded, so the bytes are final.
// - Regions: cuco_region_begin / cuco_region_end bracket the statements from the first kernel that produces
//   communicated data to the last one that consumes it (inserted by cuco). Each instance is timed on the host
//   between device synchronisations: what the program waits for, launch overhead included. With
//   CUCO_REGION_REPEATS=R, cuco_region_end returns 1 (and cuco's marker line jumps back to the region start)
//   until the site has run R times in this process, so one process gives a cold first instance and R - 1 warm
//   ones of the same statements; afterwards the program goes on as written. Every rank repeats alike.
// - Aligned starts: before each instance every rank's communicators run a one-element AllReduce and every device
//   the region uses is synchronised (all of them for one process driving several GPUs), so the clock starts when
//   every rank is ready, not when the first one is.
//
// - Warm NCCL: the communicators the program creates are recorded, and at the first region start each one runs a
//   one-element AllReduce and a send/receive with every peer, so that NCCL's lazy set-up (point-to-point
//   connections, first-collective work) is not timed as the region. Every rank reaches a region start (the
//   program is SPMD around its collectives), which this needs, as it needs every rank's collectives anyway.
//   What it cannot reach (a collective's own first-use work at its size) lands in the cold first instance.
//
// Nothing is recorded, and the markers do not synchronise, unless CUCO_OBSERVE_DIR names a directory; at exit
// each process writes `obs-<pid>.txt` (an index) and `obs-<pid>.bin` (the read-back bytes) there.
#pragma once
#define CUCO_PROGRAM_OBSERVE_H 1
#include <cuda_runtime.h>
#include <nccl.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace cuco_observe {

struct Readback { int device; unsigned long long seq; std::vector<unsigned char> bytes; };
struct Region { int site; int device; unsigned long long instance; double ms; };

// A communicator the program created: the device it runs on (-1 until asked, after its creation has completed:
// a grouped creation completes only at ncclGroupEnd), whether it was warmed, its one-float scratch buffer.
struct Comm { ncclComm_t comm; int device; bool warm; float* scratch; };

struct State {
  std::mutex mu;
  std::string dir;
  int repeats = 1;
  std::vector<Comm> comms;
  std::vector<Readback> reads;
  std::vector<Region> regions;
  std::map<int, unsigned long long> read_seq;
  std::map<std::pair<int, int>, unsigned long long> region_seq;   // (site, device) -> instances so far
  State() {
    if (const char* d = getenv("CUCO_OBSERVE_DIR")) dir = d;
    if (const char* r = getenv("CUCO_REGION_REPEATS")) repeats = atoi(r) > 1 ? atoi(r) : 1;
  }
  ~State() { write(); }
  void write() {
    if (dir.empty() || (reads.empty() && regions.empty())) return;
    std::string base = dir + "/obs-" + std::to_string((long long)getpid());
    FILE* bin = fopen((base + ".bin").c_str(), "wb");
    FILE* idx = fopen((base + ".txt.tmp").c_str(), "w");
    if (!bin || !idx) { fprintf(stderr, "cuco observe: cannot write to %s\n", dir.c_str()); return; }
    unsigned long long offset = 0;
    for (const Readback& r : reads) {
      fwrite(r.bytes.data(), 1, r.bytes.size(), bin);
      fprintf(idx, "readback %d %llu %llu %zu\n", r.device, r.seq, offset, r.bytes.size());
      offset += r.bytes.size();
    }
    for (const Region& g : regions) fprintf(idx, "region %d %d %llu %.6f\n", g.site, g.device, g.instance, g.ms);
    fclose(bin);
    fclose(idx);
    rename((base + ".txt.tmp").c_str(), (base + ".txt").c_str());   // the index last: its presence means complete
  }
};

inline State& state() { static State s; return s; }
inline bool enabled() { return !state().dir.empty(); }

inline int current_device() { int d = 0; cudaGetDevice(&d); return d; }

inline bool to_host(void* dst, const void* src, cudaMemcpyKind kind) {
  if (kind == cudaMemcpyDeviceToHost) return true;
  if (kind != cudaMemcpyDefault) return false;
  cudaPointerAttributes a{}, b{};
  if (cudaPointerGetAttributes(&a, dst) != cudaSuccess) { cudaGetLastError(); return false; }
  if (cudaPointerGetAttributes(&b, src) != cudaSuccess) { cudaGetLastError(); return false; }
  bool dst_host = a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeUnregistered;
  return dst_host && (b.type == cudaMemoryTypeDevice || b.type == cudaMemoryTypeManaged);
}

inline void record(const void* host, size_t bytes) {
  State& s = state();
  int dev = current_device();
  std::lock_guard<std::mutex> lock(s.mu);
  Readback r{dev, s.read_seq[dev]++, std::vector<unsigned char>((const unsigned char*)host,
                                                                (const unsigned char*)host + bytes)};
  s.reads.push_back(std::move(r));
}

// Synchronise the device(s) the region runs on: the current one, or every device (one process driving
// several GPUs).
inline void sync_devices(int all_devices) {
  if (!all_devices) { cudaDeviceSynchronize(); return; }
  int here = current_device(), n = 0;
  cudaGetDeviceCount(&n);
  for (int d = 0; d < n; ++d) { cudaSetDevice(d); cudaDeviceSynchronize(); }
  cudaSetDevice(here);
}

// Called at each region start before the clock starts: one-time setup a rewritten program does lazily
// (symmetric windows) happens here, as the reference's NCCL connects at init (NCCL_RUNTIME_CONNECT=0).
using Hook = void (*)();
inline Hook& prepare_hook() { static Hook h = nullptr; return h; }

struct Open { int site; int device; std::chrono::steady_clock::time_point t0; };

inline void record_comm(ncclComm_t comm) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.comms.push_back({comm, -1, false, nullptr});
}

// The communicators a region on the current device (or, with all_devices, on any) uses: warmed on first use
// (a one-element AllReduce and a send/receive with every peer), then one AllReduce across them all, every
// device synchronised: every rank reaches this point before any rank's clock starts.
inline void warm_and_align(int all_devices) {
  State& s = state();
  int here = current_device();
  std::vector<size_t> mine;
  std::vector<Comm> comms;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (size_t i = 0; i < s.comms.size(); ++i) {
      Comm& c = s.comms[i];
      if (c.device < 0 && ncclCommCuDevice(c.comm, &c.device) != ncclSuccess) continue;
      if (all_devices || c.device == here) { mine.push_back(i); comms.push_back(c); }
    }
  }
  if (comms.empty()) return;
  for (Comm& c : comms) {
    if (c.scratch) continue;
    cudaSetDevice(c.device);
    cudaMalloc(&c.scratch, 2 * sizeof(float));
    cudaMemset(c.scratch, 0, 2 * sizeof(float));
  }
  ncclGroupStart();
  for (Comm& c : comms) {
    cudaSetDevice(c.device);
    ncclAllReduce(c.scratch, c.scratch, 1, ncclFloat, ncclSum, c.comm, 0);
    if (c.warm) continue;
    int n = 0, me = 0;
    ncclCommCount(c.comm, &n);
    ncclCommUserRank(c.comm, &me);
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      ncclSend(c.scratch, 1, ncclFloat, p, c.comm, 0);
      ncclRecv(c.scratch + 1, 1, ncclFloat, p, c.comm, 0);
    }
    c.warm = true;
  }
  ncclGroupEnd();
  for (Comm& c : comms) { cudaSetDevice(c.device); cudaDeviceSynchronize(); }
  cudaSetDevice(here);
  std::lock_guard<std::mutex> lock(s.mu);
  for (size_t k = 0; k < mine.size(); ++k) s.comms[mine[k]] = comms[k];
}
inline std::vector<Open>& open_regions() { thread_local std::vector<Open> v; return v; }

}  // namespace cuco_observe

static inline void cuco_region_begin(int site, int all_devices) {
  if (!cuco_observe::enabled()) return;
  cuco_observe::warm_and_align(all_devices);
  if (cuco_observe::prepare_hook()) cuco_observe::prepare_hook()();
  cuco_observe::sync_devices(all_devices);
  // one process driving every GPU counts its instances once, whichever device is current at the start
  int device = all_devices ? 0 : cuco_observe::current_device();
  cuco_observe::open_regions().push_back({site, device, std::chrono::steady_clock::now()});
  if (getenv("CUCOFP_TRACE"))
    fprintf(stderr, "region %d begins at %.1f us\n", site, std::chrono::duration<double, std::micro>(
        cuco_observe::open_regions().back().t0.time_since_epoch()).count());
}

// Ends the region's instance; 1 when the site should run again (CUCO_REGION_REPEATS), else 0.
static inline int cuco_region_end(int site, int all_devices) {
  if (!cuco_observe::enabled()) return 0;
  cuco_observe::sync_devices(all_devices);
  auto t1 = std::chrono::steady_clock::now();
  if (getenv("CUCOFP_TRACE"))
    fprintf(stderr, "region %d ends at %.1f us\n", site, std::chrono::duration<double, std::micro>(t1.time_since_epoch()).count());
  auto& open = cuco_observe::open_regions();
  for (size_t i = open.size(); i-- > 0;) {
    if (open[i].site != site) continue;
    cuco_observe::State& s = cuco_observe::state();
    double ms = std::chrono::duration<double, std::milli>(t1 - open[i].t0).count();
    std::lock_guard<std::mutex> lock(s.mu);
    unsigned long long n = s.region_seq[{site, open[i].device}]++;
    s.regions.push_back({site, open[i].device, n, ms});
    open.erase(open.begin() + (long)i);
    return n + 1 < (unsigned long long)s.repeats ? 1 : 0;
  }
  return 0;
}

static inline cudaError_t cuco_observed_memcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  cudaError_t e = cudaMemcpy(dst, src, bytes, kind);
  if (e == cudaSuccess && cuco_observe::enabled() && cuco_observe::to_host(dst, src, kind))
    cuco_observe::record(dst, bytes);
  return e;
}

static inline cudaError_t cuco_observed_memcpy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                                                     cudaStream_t stream = 0) {
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, stream);
  if (e == cudaSuccess && cuco_observe::enabled() && cuco_observe::to_host(dst, src, kind)) {
    e = cudaStreamSynchronize(stream);
    if (e == cudaSuccess) cuco_observe::record(dst, bytes);
  }
  return e;
}

static inline ncclResult_t cuco_observed_comm_init_rank(ncclComm_t* comm, int n, ncclUniqueId id, int rank) {
  ncclResult_t r = ncclCommInitRank(comm, n, id, rank);
  if (r == ncclSuccess) cuco_observe::record_comm(*comm);
  return r;
}
static inline ncclResult_t cuco_observed_comm_init_rank_config(ncclComm_t* comm, int n, ncclUniqueId id, int rank,
                                                                ncclConfig_t* config) {
  ncclResult_t r = ncclCommInitRankConfig(comm, n, id, rank, config);
  if (r == ncclSuccess) cuco_observe::record_comm(*comm);
  return r;
}
static inline ncclResult_t cuco_observed_comm_init_all(ncclComm_t* comms, int n, const int* devices) {
  ncclResult_t r = ncclCommInitAll(comms, n, devices);
  if (r == ncclSuccess) for (int i = 0; i < n; ++i) cuco_observe::record_comm(comms[i]);
  return r;
}

// The program's own read-backs and communicator creation go through the observers (the functions above were
// compiled before these).
#define cudaMemcpy cuco_observed_memcpy
#define cudaMemcpyAsync cuco_observed_memcpy_async
#define ncclCommInitRank cuco_observed_comm_init_rank
#define ncclCommInitRankConfig cuco_observed_comm_init_rank_config
#define ncclCommInitAll cuco_observed_comm_init_all
