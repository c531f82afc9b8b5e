// Standalone development driver for workload plugins and candidates (one process, one thread per GPU).
// It follows the cuco ABI the way the harness does: describe -> buffers (symmetric ones registered as windows)
// -> requirements -> devcomm -> setup -> per seed: fill, poison, launch, check -> timing (median of the max
// over ranks, each launch between host barriers) -> parts.
//
//   driver --workload W.so --candidate C1.so [--candidate C2.so ...] --dims M,K,N [--dims ...]
//          [--world 2] [--seeds 1,2] [--bench 20] [--warmup 5] [--parts 1]
// Prints one line per result: RESULT {json}.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <cublasLt.h>

#include "cuco/abi.h"

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "CUDA %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
      _exit(2);                                                                                    \
    }                                                                                              \
  } while (0)
#define NK(x)                                                                                      \
  do {                                                                                             \
    ncclResult_t r_ = (x);                                                                         \
    if (r_ != ncclSuccess) {                                                                       \
      fprintf(stderr, "NCCL %s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_));      \
      _exit(2);                                                                                    \
    }                                                                                              \
  } while (0)

struct Barrier {
  std::mutex m;
  std::condition_variable cv;
  int n, count = 0;
  long gen = 0;
  explicit Barrier(int n_) : n(n_) {}
  void wait() {
    std::unique_lock<std::mutex> l(m);
    long g = gen;
    if (++count == n) {
      count = 0;
      ++gen;
      cv.notify_all();
    } else {
      cv.wait(l, [&] { return gen != g; });
    }
  }
};

struct Lib {
  void* h = nullptr;
  std::string path;
  void* sym(const char* name, bool required = true) {
    void* p = dlsym(h, name);
    if (!p && required) {
      fprintf(stderr, "%s: missing symbol %s\n", path.c_str(), name);
      _exit(2);
    }
    return p;
  }
};

static Lib open_lib(const std::string& path) {
  Lib l;
  l.path = path;
  l.h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!l.h) {
    fprintf(stderr, "dlopen %s: %s\n", path.c_str(), dlerror());
    _exit(2);
  }
  return l;
}

struct Opts {
  std::string workload;
  std::vector<std::string> candidates;
  std::vector<std::vector<int64_t>> dims;
  std::vector<uint64_t> seeds{1, 2};
  int world = 0, bench = 20, warmup = 5, parts = 1;
  int force_bench = 0;  // diagnostics: time candidates even when verification failed
};

static std::atomic<long> g_progress{0};
static std::mutex g_print;

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Times fn() `iters` times after `warm` untimed runs; returns per-iteration max-over-ranks times (ms).
template <typename F>
static std::vector<double> time_it(int rank, int world, Barrier& bar, std::vector<std::vector<double>>& shared,
                                   cuco_ctx& ctx, cudaEvent_t e0, cudaEvent_t e1, cudaEvent_t ej, int warm, int iters,
                                   F fn, int* rc_out) {
  std::vector<double> mine;
  for (int it = 0; it < warm + iters; ++it) {
    bar.wait();
    CK(cudaEventRecord(e0, ctx.stream));
    ctx.iteration++;
    int rc = fn();
    if (rc && !*rc_out) *rc_out = rc;
    CK(cudaEventRecord(ej, ctx.side_stream));
    CK(cudaStreamWaitEvent(ctx.stream, ej, 0));
    CK(cudaEventRecord(e1, ctx.stream));
    CK(cudaStreamSynchronize(ctx.stream));
    g_progress++;
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (it >= warm) mine.push_back(ms);
  }
  shared[rank] = mine;
  bar.wait();
  std::vector<double> out(iters, 0);
  for (int r = 0; r < world; ++r)
    for (int i = 0; i < iters; ++i) out[i] = std::max(out[i], shared[r][i]);
  bar.wait();
  return out;
}

static void rank_main(int rank, int world, ncclUniqueId id, const Opts& o, Lib& wl, std::vector<Lib>& cands,
                      Barrier& bar, std::vector<std::vector<double>>& shared) {
  CK(cudaSetDevice(rank));
  ncclComm_t comm;
  NK(ncclCommInitRank(&comm, world, id, rank));
  cublasLtHandle_t lt;
  cublasLtCreate(&lt);
  int lo, hi;
  CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  cudaStream_t stream, side;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithPriority(&side, cudaStreamNonBlocking, hi));
  cudaEvent_t e0, e1, ej;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreateWithFlags(&ej, cudaEventDisableTiming));
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, rank));

  auto describe = (cuco_workload_describe_fn)wl.sym(CUCO_SYM_WORKLOAD_DESCRIBE);
  auto wsetup = (cuco_workload_setup_fn)wl.sym(CUCO_SYM_WORKLOAD_SETUP);
  auto wfill = (cuco_workload_fill_fn)wl.sym(CUCO_SYM_WORKLOAD_FILL);
  auto wcheck = (cuco_workload_check_fn)wl.sym(CUCO_SYM_WORKLOAD_CHECK);
  auto wparts = (cuco_workload_parts_fn)wl.sym(CUCO_SYM_WORKLOAD_PARTS);
  auto wteardown = (cuco_workload_teardown_fn)wl.sym(CUCO_SYM_WORKLOAD_TEARDOWN);

  for (const auto& dims : o.dims) {
    cuco_workload_desc desc;
    if (describe(dims.data(), (int)dims.size(), world, &desc)) {
      if (rank == 0) printf("RESULT {\"error\": \"describe: %s\"}\n", desc.error);
      continue;
    }
    cuco_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.abi_version = CUCO_ABI_VERSION;
    ctx.rank = ctx.local_rank = rank;
    ctx.world = ctx.local_world = world;
    ctx.device = rank;
    ctx.sm_count = sms;
    ctx.ndims = (int)dims.size();
    for (size_t i = 0; i < dims.size(); ++i) ctx.dims[i] = dims[i];
    ctx.comm = comm;
    ctx.stream = stream;
    ctx.side_stream = side;
    ctx.cublaslt = lt;
    ctx.nbuffers = desc.nbuffers;
    for (int b = 0; b < desc.nbuffers; ++b) {
      ctx.buffers[b].bytes = desc.buffers[b].bytes;
      if (desc.buffers[b].symmetric) {
        NK(ncclMemAlloc(&ctx.buffers[b].ptr, desc.buffers[b].bytes));
        NK(ncclCommWindowRegister(comm, ctx.buffers[b].ptr, desc.buffers[b].bytes, &ctx.buffers[b].window,
                                  NCCL_WIN_COLL_SYMMETRIC));
      } else {
        CK(cudaMalloc(&ctx.buffers[b].ptr, desc.buffers[b].bytes));
      }
    }
    int rc = wsetup(&ctx);
    if (rc) {
      fprintf(stderr, "workload setup failed %d\n", rc);
      _exit(2);
    }
    char dimstr[64];
    snprintf(dimstr, sizeof(dimstr), "%lld,%lld,%lld", (long long)dims[0], (long long)dims[1], (long long)dims[2]);

    if (o.parts) {
      const cuco_part* parts;
      int np;
      wparts(&parts, &np);
      for (int i = 0; i < np; ++i) {
        int prc = 0;
        auto t = time_it(rank, world, bar, shared, ctx, e0, e1, ej, o.warmup, o.bench, [&] { return parts[i].launch(&ctx); },
                         &prc);
        if (rank == 0)
          printf("RESULT {\"dims\": \"%s\", \"part\": \"%s\", \"rc\": %d, \"median_ms\": %.4f, \"min_ms\": %.4f}\n", dimstr,
                 parts[i].name, prc, median(t), *std::min_element(t.begin(), t.end()));
        fflush(stdout);
      }
    }

    for (auto& cl : cands) {
      auto creq = (cuco_candidate_requirements_fn)cl.sym(CUCO_SYM_CANDIDATE_REQUIREMENTS);
      auto csetup = (cuco_candidate_setup_fn)cl.sym(CUCO_SYM_CANDIDATE_SETUP, false);
      auto claunch = (cuco_candidate_launch_fn)cl.sym(CUCO_SYM_CANDIDATE_LAUNCH);
      auto cteardown = (cuco_candidate_teardown_fn)cl.sym(CUCO_SYM_CANDIDATE_TEARDOWN, false);
      const char* name = strrchr(cl.path.c_str(), '/') ? strrchr(cl.path.c_str(), '/') + 1 : cl.path.c_str();
      cuco_requirements req;
      memset(&req, 0, sizeof(req));
      ctx.has_devcomm = 0;
      ctx.candidate_state = nullptr;
      if ((rc = creq(&ctx, &req))) {
        if (rank == 0) printf("RESULT {\"dims\": \"%s\", \"candidate\": \"%s\", \"error\": \"requirements %d\"}\n", dimstr, name, rc);
        continue;
      }
      if (req.gin_required) {
        if (rank == 0) printf("RESULT {\"dims\": \"%s\", \"candidate\": \"%s\", \"unsupported\": \"gin\"}\n", dimstr, name);
        continue;
      }
#ifdef NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER
      ncclDevCommRequirements dreq = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
#else
      ncclDevCommRequirements dreq;
      memset(&dreq, 0, sizeof(dreq));
#endif
      dreq.lsaBarrierCount = req.lsa_barrier_count;
      NK(ncclDevCommCreate(comm, &dreq, &ctx.devcomm));
      ctx.has_devcomm = 1;
      ctx.workspace = nullptr;
      ctx.workspace_bytes = req.workspace_bytes;
      if (req.workspace_bytes) {
        CK(cudaMalloc(&ctx.workspace, req.workspace_bytes));
        CK(cudaMemset(ctx.workspace, 0, req.workspace_bytes));
      }
      memset(&ctx.symmetric_workspace, 0, sizeof(ctx.symmetric_workspace));
      if (req.symmetric_workspace_bytes) {
        ctx.symmetric_workspace.bytes = req.symmetric_workspace_bytes;
        NK(ncclMemAlloc(&ctx.symmetric_workspace.ptr, req.symmetric_workspace_bytes));
        CK(cudaMemset(ctx.symmetric_workspace.ptr, 0, req.symmetric_workspace_bytes));
        NK(ncclCommWindowRegister(comm, ctx.symmetric_workspace.ptr, req.symmetric_workspace_bytes,
                                  &ctx.symmetric_workspace.window, NCCL_WIN_COLL_SYMMETRIC));
      }
      CK(cudaDeviceSynchronize());
      bar.wait();
      rc = csetup ? csetup(&ctx) : 0;
      std::string verdict;
      int all_pass = rc == 0;
      if (rc) verdict = "setup " + std::to_string(rc);
      const int setup_ok = rc == 0;
      for (uint64_t seed : o.seeds) {  // every rank passes every barrier, so they stay matched
        int lrc = 0, crc = 0;
        cuco_check_result cr;
        memset(&cr, 0, sizeof(cr));
        if (setup_ok) {
          CK(cudaDeviceSynchronize());
          wfill(&ctx, seed);
          for (int b = 0; b < ctx.nbuffers; ++b)
            if (desc.buffers[b].role != CUCO_BUF_INPUT)
              CK(cudaMemsetAsync(ctx.buffers[b].ptr, 0xFF, ctx.buffers[b].bytes, stream));
          CK(cudaStreamSynchronize(stream));
        }
        bar.wait();
        if (setup_ok) {
          ctx.iteration++;
          lrc = claunch(&ctx);
          CK(cudaEventRecord(ej, side));
          CK(cudaStreamWaitEvent(stream, ej, 0));
          CK(cudaStreamSynchronize(stream));
          g_progress++;
        }
        bar.wait();
        if (!setup_ok) continue;
        crc = wcheck(&ctx, seed, &cr);
        std::lock_guard<std::mutex> l(g_print);
        if (lrc || crc || !cr.passed) {
          all_pass = 0;
          char buf[512];
          snprintf(buf, sizeof(buf), "rank %d seed %llu launch=%d check=%d %s", rank, (unsigned long long)seed, lrc,
                   crc, cr.message);
          verdict = buf;
        } else if (all_pass && seed == o.seeds.front()) {
          verdict = cr.message;
        }
      }
      // agree on pass/fail
      shared[rank] = {(double)all_pass};
      bar.wait();
      int pass_all = 1;
      for (int r = 0; r < world; ++r) pass_all &= shared[r][0] > 0.5;
      bar.wait();
      double med = 0, mn = 0;
      int brc = 0;
      if ((pass_all || o.force_bench) && o.bench > 0) {
        auto t = time_it(rank, world, bar, shared, ctx, e0, e1, ej, o.warmup, o.bench, [&] { return claunch(&ctx); }, &brc);
        med = median(t);
        mn = *std::min_element(t.begin(), t.end());
      }
      if (!pass_all || rank == 0) {
        std::lock_guard<std::mutex> l(g_print);
        std::string v = verdict;
        for (auto& ch : v)
          if (ch == '"') ch = '\'';
        printf("RESULT {\"dims\": \"%s\", \"candidate\": \"%s\", \"rank\": %d, \"verified\": %s, \"bench_rc\": %d, "
               "\"median_ms\": %.4f, \"min_ms\": %.4f, \"msg\": \"%s\"}\n",
               dimstr, name, rank, pass_all ? "true" : "false", brc, med, mn, v.c_str());
        fflush(stdout);
      }
      if (cteardown) cteardown(&ctx);
      CK(cudaDeviceSynchronize());
      bar.wait();
      if (ctx.workspace) CK(cudaFree(ctx.workspace));
      if (ctx.symmetric_workspace.ptr) {
        NK(ncclCommWindowDeregister(comm, ctx.symmetric_workspace.window));
        NK(ncclMemFree(ctx.symmetric_workspace.ptr));
      }
      NK(ncclDevCommDestroy(comm, &ctx.devcomm));
      bar.wait();
    }
    wteardown(&ctx);
    for (int b = 0; b < ctx.nbuffers; ++b) {
      if (desc.buffers[b].symmetric) {
        NK(ncclCommWindowDeregister(comm, ctx.buffers[b].window));
        NK(ncclMemFree(ctx.buffers[b].ptr));
      } else {
        CK(cudaFree(ctx.buffers[b].ptr));
      }
    }
    bar.wait();
  }
  cublasLtDestroy(lt);
  ncclCommDestroy(comm);
}

static std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> v;
  for (const char* p = s; *p;) {
    v.push_back(strtoll(p, (char**)&p, 10));
    if (*p == ',' || *p == 'x') ++p;
  }
  return v;
}

int main(int argc, char** argv) {
  Opts o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--workload") o.workload = v;
    else if (k == "--candidate") o.candidates.push_back(v);
    else if (k == "--dims") o.dims.push_back(parse_list(v));
    else if (k == "--world") o.world = atoi(v);
    else if (k == "--seeds") { o.seeds.clear(); for (auto x : parse_list(v)) o.seeds.push_back((uint64_t)x); }
    else if (k == "--bench") o.bench = atoi(v);
    else if (k == "--warmup") o.warmup = atoi(v);
    else if (k == "--parts") o.parts = atoi(v);
    else if (k == "--force-bench") o.force_bench = atoi(v);
    else { fprintf(stderr, "unknown option %s\n", k.c_str()); return 2; }
  }
  int nd = 0;
  CK(cudaGetDeviceCount(&nd));
  int world = o.world ? o.world : nd;
  if (world > nd || o.workload.empty() || o.dims.empty()) {
    fprintf(stderr, "need --workload, --dims and world <= %d GPUs\n", nd);
    return 2;
  }
  Lib wl = open_lib(o.workload);
  std::vector<Lib> cands;
  for (auto& c : o.candidates) cands.push_back(open_lib(c));
  ncclUniqueId id;
  NK(ncclGetUniqueId(&id));
  Barrier bar(world);
  std::vector<std::vector<double>> shared(world);
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    long last = -1;
    int idle = 0;
    while (!done) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      long p = g_progress.load();
      idle = (p == last) ? idle + 1 : 0;
      last = p;
      if (idle > 90) {
        printf("RESULT {\"error\": \"watchdog: no progress for 90 s (hang)\"}\n");
        fflush(stdout);
        _exit(3);
      }
    }
  });
  std::vector<std::thread> th;
  for (int r = 0; r < world; ++r)
    th.emplace_back(rank_main, r, world, id, std::cref(o), std::ref(wl), std::ref(cands), std::ref(bar), std::ref(shared));
  for (auto& t : th) t.join();
  done = true;
  watchdog.join();
  return 0;
}
