// Example input for `cuco transform`: every rank computes a block, the blocks are all-gathered with NCCL,
// then a kernel consumes the gathered matrix. One process drives all local GPUs.
//
//   cuco transform examples/host_programs/allgather_then_compute.cu -o ag_device.cu
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include <nccl.h>

#define CUDACHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  printf("CUDA error %s at line %d\n", cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)
#define NCCLCHECK(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { \
  printf("NCCL error %s at line %d\n", ncclGetErrorString(r_), __LINE__); exit(1); } } while (0)

__global__ void make_block(float* block, int rank, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    block[i] = (float)(rank * 10 + (int)(i % 7));
}

__global__ void row_sums(const float* gathered, float* sums, size_t rows, size_t cols) {
  for (size_t r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x) {
    float s = 0.0f;
    for (size_t c = 0; c < cols; ++c) s += gathered[r * cols + c];
    sums[r] = s;
  }
}

int main() {
  int nd = 0;
  CUDACHECK(cudaGetDeviceCount(&nd));
  const size_t cols = 256, rows_per_rank = 4096, n = rows_per_rank * cols;
  std::vector<ncclComm_t> comms(nd);
  NCCLCHECK(ncclCommInitAll(comms.data(), nd, nullptr));
  std::vector<float*> block(nd), gathered(nd), sums(nd);
  std::vector<cudaStream_t> st(nd);
  for (int r = 0; r < nd; ++r) {
    CUDACHECK(cudaSetDevice(r));
    CUDACHECK(cudaMalloc(&block[r], n * sizeof(float)));
    CUDACHECK(cudaMalloc(&gathered[r], nd * n * sizeof(float)));
    CUDACHECK(cudaMalloc(&sums[r], nd * rows_per_rank * sizeof(float)));
    CUDACHECK(cudaStreamCreate(&st[r]));
  }
  for (int r = 0; r < nd; ++r) {
    CUDACHECK(cudaSetDevice(r));
    make_block<<<128, 256, 0, st[r]>>>(block[r], r, n);
  }
  NCCLCHECK(ncclGroupStart());
  for (int r = 0; r < nd; ++r) NCCLCHECK(ncclAllGather(block[r], gathered[r], n, ncclFloat, comms[r], st[r]));
  NCCLCHECK(ncclGroupEnd());
  for (int r = 0; r < nd; ++r) {
    CUDACHECK(cudaSetDevice(r));
    row_sums<<<64, 256, 0, st[r]>>>(gathered[r], sums[r], nd * rows_per_rank, cols);
  }
  for (int r = 0; r < nd; ++r) {
    CUDACHECK(cudaSetDevice(r));
    CUDACHECK(cudaStreamSynchronize(st[r]));
    std::vector<float> h(nd * rows_per_rank);
    CUDACHECK(cudaMemcpy(h.data(), sums[r], h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    double total = 0;
    for (size_t i = 0; i < h.size(); ++i) total += h[i] * (double)(1 + i % 3);
    printf("checksum rank %d: %.1f\n", r, total);
  }
  for (int r = 0; r < nd; ++r) {
    CUDACHECK(cudaSetDevice(r));
    CUDACHECK(cudaFree(block[r])); CUDACHECK(cudaFree(gathered[r])); CUDACHECK(cudaFree(sums[r]));
    NCCLCHECK(ncclCommDestroy(comms[r]));
  }
  return 0;
}
