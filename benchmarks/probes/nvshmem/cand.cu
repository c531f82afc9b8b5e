// NVSHMEM probe, candidate side: put-with-signal of a block to this PE's other half, a waiting kernel that copies
// it out only after the signal; built -rdc=true -shared against libnvshmem_device.a.
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

int nvshmemi_check_state_and_init_d();  // in libnvshmem_device.a: host state check + this module's device state

__global__ void spin(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < ns);
}

__global__ void put_signal(int* buf, uint64_t* sig, int n, uint64_t epoch) {
  if (blockIdx.x == 0)
    nvshmemx_putmem_signal_block(buf + n, buf, n * sizeof(int), sig, epoch, NVSHMEM_SIGNAL_SET, nvshmem_my_pe());
}

__global__ void wait_and_copy(const int* buf, int* out, uint64_t* sig, int n, uint64_t epoch) {
  if (threadIdx.x == 0) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, epoch);
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = buf[n + i];
}

__global__ void fill(int* buf, int n, int base) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) buf[i] = base + i, buf[n + i] = -1;
}

extern "C" int cand_attach(int mode, const void* attr) {
  if (mode == 1) return nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, (nvshmemx_init_attr_t*)attr);
  if (mode == 2) return nvshmemi_check_state_and_init_d();
  return 0;
}

static uint64_t epoch = 0;

extern "C" int cand_run(int* buf, uint64_t* sig, int n, int delay_us) {
  int* out = nullptr;
  cudaMalloc(&out, n * sizeof(int));
  cudaMemset(out, 0xff, n * sizeof(int));
  cudaStream_t side, main_s;
  cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&main_s, cudaStreamNonBlocking);
  fill<<<256, 256, 0, main_s>>>(buf, n, 7 + (int)epoch);
  cudaStreamSynchronize(main_s);
  ++epoch;
  if (delay_us) spin<<<1, 1, 0, side>>>((unsigned long long)delay_us * 1000);
  put_signal<<<1, 512, 0, side>>>(buf, sig, n, epoch);
  wait_and_copy<<<132, 512, 0, main_s>>>(buf, out, sig, n, epoch);
  cudaError_t e1 = cudaStreamSynchronize(main_s), e2 = cudaStreamSynchronize(side);
  int* h = (int*)malloc(n * sizeof(int));
  cudaMemcpy(h, out, n * sizeof(int), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += h[i] != 7 + (int)epoch - 1 + i;
  free(h);
  cudaFree(out);
  if (e1 || e2) printf("cuda errors: %s %s\n", cudaGetErrorString(e1), cudaGetErrorString(e2));
  return e1 || e2 ? -1 : bad;
}
