// Example input for `cuco transform`: one host thread per GPU, a ring of grouped ncclSend/ncclRecv
// steps (each rank forwards what it received), then an in-place AllReduce of the accumulated values.
//
//   cuco transform examples/host_programs/ring_exchange.cu -o ring_device.cu
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
#include <cuda_runtime.h>
#include <nccl.h>

#define CUDACHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  printf("CUDA error %s at line %d\n", cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)
#define NCCLCHECK(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { \
  printf("NCCL error %s at line %d\n", ncclGetErrorString(r_), __LINE__); exit(1); } } while (0)

__global__ void seed(float* x, int rank, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = (float)(rank + 1);
}

__global__ void add(const float* in, float* acc, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc[i] = acc[i] + in[i];
}

static void rank_main(int rank, int world, ncclUniqueId id) {
  const size_t n = 1 << 20;
  CUDACHECK(cudaSetDevice(rank));
  ncclComm_t comm;
  NCCLCHECK(ncclCommInitRank(&comm, world, id, rank));
  float *a, *b, *acc;
  CUDACHECK(cudaMalloc(&a, n * sizeof(float)));
  CUDACHECK(cudaMalloc(&b, n * sizeof(float)));
  CUDACHECK(cudaMalloc(&acc, n * sizeof(float)));
  CUDACHECK(cudaMemset(acc, 0, n * sizeof(float)));
  cudaStream_t s;
  CUDACHECK(cudaStreamCreate(&s));
  seed<<<64, 256, 0, s>>>(a, rank, n);
  for (int step = 0; step < world; ++step) {
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(a, n, ncclFloat, (rank + 1) % world, comm, s));
    NCCLCHECK(ncclRecv(b, n, ncclFloat, (rank + world - 1) % world, comm, s));
    NCCLCHECK(ncclGroupEnd());
    add<<<64, 256, 0, s>>>(b, acc, n);
    float* t = a; a = b; b = t;
  }
  NCCLCHECK(ncclAllReduce(acc, acc, n, ncclFloat, ncclSum, comm, s));
  std::vector<float> h(n);
  CUDACHECK(cudaMemcpyAsync(h.data(), acc, n * sizeof(float), cudaMemcpyDeviceToHost, s));
  CUDACHECK(cudaStreamSynchronize(s));
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += h[i];
  printf("checksum rank %d: %.1f\n", rank, total);
  CUDACHECK(cudaFree(a)); CUDACHECK(cudaFree(b)); CUDACHECK(cudaFree(acc));
  NCCLCHECK(ncclCommDestroy(comm));
}

int main() {
  int world = 0;
  CUDACHECK(cudaGetDeviceCount(&world));
  ncclUniqueId id;
  NCCLCHECK(ncclGetUniqueId(&id));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back(rank_main, r, world, id);
  for (auto& t : threads) t.join();
  return 0;
}
