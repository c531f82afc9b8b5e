// NVSHMEM probe, host side (harness-like): brings the host library up with a unique id (one PE per process),
// allocates symmetric memory, dlopens a candidate-like shared object with NVSHMEM device code and runs it.
//   host CAND.so MODE   (MODE: none | init_attr | check_state: how the candidate attaches its device state)
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

typedef int (*attach_fn)(int mode, const void* attr);
typedef int (*run_fn)(int* buf, uint64_t* sig, int n, int delay_us);

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  cudaSetDevice(0);
  nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  if (nvshmemx_get_uniqueid(&id)) { printf("get_uniqueid failed\n"); return 3; }
  if (nvshmemx_set_attr_uniqueid_args(0, 1, &id, &attr)) { printf("set_attr failed\n"); return 3; }
  int rc = nvshmemx_hostlib_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr);
  printf("hostlib_init_attr: %d, init_status %d, my_pe %d n_pes %d\n", rc, nvshmemx_init_status(), nvshmem_my_pe(),
         nvshmem_n_pes());
  const int n = 1 << 20;
  int* buf = (int*)nvshmem_malloc(2 * n * sizeof(int));
  uint64_t* sig = (uint64_t*)nvshmem_malloc(sizeof(uint64_t));
  printf("nvshmem_malloc: %p %p\n", (void*)buf, (void*)sig);
  if (!buf || !sig) return 4;
  void* so = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!so) { printf("dlopen: %s\n", dlerror()); return 5; }
  attach_fn attach = (attach_fn)dlsym(so, "cand_attach");
  run_fn run = (run_fn)dlsym(so, "cand_run");
  int mode = !strcmp(argv[2], "none") ? 0 : !strcmp(argv[2], "init_attr") ? 1 : 2;
  rc = attach(mode, &attr);
  printf("attach(%s): %d\n", argv[2], rc);
  for (int delay : {0, 2000}) {
    rc = run(buf, sig, n, delay);
    printf("run(delay %d us): %s (%d)\n", delay, rc == 0 ? "PASS" : "FAIL", rc);
  }
  nvshmem_free(buf);
  nvshmem_free(sig);
  nvshmemx_hostlib_finalize();
  printf("done\n");
  return 0;
}
