// NCCL AllReduce, ReduceScatter and Reduce (bf16 sum, out of place) from 64 KiB to 1 GiB, one host thread per GPU,
// timed with CUDA events as nccl-tests does: 5 warm-up calls, then per repeat `kIters` calls back to back between
// two events (every rank's GPU aligned before), the median of 3 repeats. benchmarks/reductions_vs_nccl.py runs this
// program as written and the fast path's rewrite of it (the same source through cuco's transform), so both sides
// are timed by the same code. Prints one line per (collective, size) from rank 0 with the slowest rank's time, one
// with the slowest rank's host time to enqueue a call (the same repeats: where it is close to the call's time, the
// GPU waited for the host), and a correctness line per collective: the elements wrong over every size, each
// size's last call checked (inputs are small integers, exact in bf16 sums up to W = 8).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#define CUDACHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); exit(1); } } while (0)
#define NCCLCHECK(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { \
  fprintf(stderr, "NCCL error %s at %s:%d\n", ncclGetErrorString(r_), __FILE__, __LINE__); exit(1); } } while (0)

constexpr int kIters = 20, kRepeats = 3;
constexpr size_t kMinBytes = 64 << 10, kMaxBytes = 1ull << 30;

__global__ void fill(__nv_bfloat16* x, int rank, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    x[i] = __float2bfloat16((float)(rank + 1 + (int)(i % 3)));
}

// Counts elements of y[0, n) that differ from the sum over ranks of x_r[offset + i] (fill's values).
__global__ void check(const __nv_bfloat16* y, size_t n, size_t offset, int world, unsigned long long* wrong) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float want = 0;
    for (int r = 0; r < world; ++r) want += (float)(r + 1 + (int)((offset + i) % 3));
    if (__bfloat162float(y[i]) != want) atomicAdd(wrong, 1ull);
  }
}

struct Shared {
  std::mutex m;
  std::vector<float> ms;        // per rank, the last size's median
  std::vector<float> host_ms;   // per rank, the last size's median host time to enqueue one call
  std::vector<unsigned long long> wrong;
};

// A reusable barrier of the host threads (the GPUs are aligned by a tiny AllReduce after it).
struct HostBarrier {
  std::mutex m;
  int count = 0, generation = 0, n;
  explicit HostBarrier(int n_) : n(n_) {}
  void wait() {
    std::unique_lock<std::mutex> lock(m);
    int gen = generation;
    if (++count == n) { count = 0; ++generation; return; }
    lock.unlock();
    while (true) {
      std::this_thread::yield();
      std::lock_guard<std::mutex> again(m);
      if (generation != gen) return;
    }
  }
};

static void worker(int rank, int world, ncclUniqueId id, Shared* shared, HostBarrier* barrier) {
  CUDACHECK(cudaSetDevice(rank));
  ncclComm_t comm;
  NCCLCHECK(ncclCommInitRank(&comm, world, id, rank));
  cudaStream_t s;
  CUDACHECK(cudaStreamCreate(&s));
  const size_t maxN = kMaxBytes / sizeof(__nv_bfloat16);
  __nv_bfloat16 *send, *recv;
  float* tiny;
  unsigned long long* wrong;
  CUDACHECK(cudaMalloc(&send, kMaxBytes));
  CUDACHECK(cudaMalloc(&recv, kMaxBytes));
  CUDACHECK(cudaMalloc(&tiny, sizeof(float)));
  CUDACHECK(cudaMalloc(&wrong, sizeof(unsigned long long)));
  fill<<<1024, 256, 0, s>>>(send, rank, maxN);
  cudaEvent_t a, b;
  CUDACHECK(cudaEventCreate(&a));
  CUDACHECK(cudaEventCreate(&b));
  const char* names[3] = {"allreduce", "reducescatter", "reduce"};
  for (int coll = 0; coll < 3; ++coll) {
    CUDACHECK(cudaMemsetAsync(wrong, 0, sizeof(unsigned long long), s));
    for (size_t bytes = kMinBytes; bytes <= kMaxBytes; bytes *= 4) {
      size_t n = bytes / sizeof(__nv_bfloat16);   // the collective's whole buffer (nccl-tests' size)
      auto call = [&]() {
        if (coll == 0) NCCLCHECK(ncclAllReduce(send, recv, n, ncclBfloat16, ncclSum, comm, s));
        else if (coll == 1) NCCLCHECK(ncclReduceScatter(send, recv, n / world, ncclBfloat16, ncclSum, comm, s));
        else NCCLCHECK(ncclReduce(send, recv, n, ncclBfloat16, ncclSum, 0, comm, s));
      };
      for (int it = 0; it < 5; ++it) call();
      std::vector<float> times, host;
      for (int rep = 0; rep < kRepeats; ++rep) {   // kIters calls back to back per repeat, as nccl-tests times
        barrier->wait();
        NCCLCHECK(ncclAllReduce(tiny, tiny, 1, ncclFloat, ncclSum, comm, s));   // the GPUs aligned
        CUDACHECK(cudaEventRecord(a, s));
        auto t0 = std::chrono::steady_clock::now();
        for (int it = 0; it < kIters; ++it) call();
        std::chrono::duration<float, std::milli> enqueued = std::chrono::steady_clock::now() - t0;
        host.push_back(enqueued.count() / kIters);
        CUDACHECK(cudaEventRecord(b, s));
        CUDACHECK(cudaEventSynchronize(b));
        float ms = 0;
        CUDACHECK(cudaEventElapsedTime(&ms, a, b));
        times.push_back(ms / kIters);
      }
      std::sort(times.begin(), times.end());
      std::sort(host.begin(), host.end());
      {
        std::lock_guard<std::mutex> lock(shared->m);
        shared->ms[rank] = times[times.size() / 2];
        shared->host_ms[rank] = host[host.size() / 2];
      }
      barrier->wait();
      if (rank == 0) {
        float slowest = *std::max_element(shared->ms.begin(), shared->ms.end());
        printf("time %s %zu %.6f\n", names[coll], bytes, slowest);
        float host_slowest = *std::max_element(shared->host_ms.begin(), shared->host_ms.end());
        printf("host %s %zu %.6f\n", names[coll], bytes, host_slowest);
        fflush(stdout);
      }
      barrier->wait();
      // this size's last call checked (small buffers take other kernels than large ones)
      if (coll == 0) check<<<1024, 256, 0, s>>>(recv, n, 0, world, wrong);
      else if (coll == 1) check<<<1024, 256, 0, s>>>(recv, n / world, rank * (n / world), world, wrong);
      else if (rank == 0) check<<<1024, 256, 0, s>>>(recv, n, 0, world, wrong);
    }
    unsigned long long h = 0;
    CUDACHECK(cudaMemcpyAsync(&h, wrong, sizeof h, cudaMemcpyDeviceToHost, s));
    CUDACHECK(cudaStreamSynchronize(s));
    {
      std::lock_guard<std::mutex> lock(shared->m);
      shared->wrong[rank] = h;
    }
    barrier->wait();
    if (rank == 0) {
      unsigned long long total = 0;
      for (unsigned long long w : shared->wrong) total += w;
      printf("wrong %s %llu\n", names[coll], total);
      fflush(stdout);
    }
    barrier->wait();
  }
  CUDACHECK(cudaFree(send));
  CUDACHECK(cudaFree(recv));
  CUDACHECK(cudaFree(tiny));
  CUDACHECK(cudaFree(wrong));
  CUDACHECK(cudaStreamDestroy(s));
  NCCLCHECK(ncclCommDestroy(comm));
}

int main() {
  int world = 0;
  CUDACHECK(cudaGetDeviceCount(&world));
  if (const char* w = getenv("WORLD_SIZE")) world = std::min(world, atoi(w));
  ncclUniqueId id;
  NCCLCHECK(ncclGetUniqueId(&id));
  Shared shared;
  shared.ms.assign(world, 0.f);
  shared.host_ms.assign(world, 0.f);
  shared.wrong.assign(world, 0);
  HostBarrier barrier(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back(worker, r, world, id, &shared, &barrier);
  for (auto& t : threads) t.join();
  printf("world %d\n", world);
  return 0;
}
