// cuco candidate and workload ABI (version 2: the harness links no compute library; workloads bring theirs).
//
// The harness owns main(): it starts one rank per GPU, creates the NCCL communicator, allocates the
// workload's buffers (symmetric ones through ncclMemAlloc + ncclCommWindowRegister), creates the
// ncclDevComm with the requirements the candidate declares, fills inputs, poisons outputs, times and
// verifies. Two kinds of shared objects plug into it:
//
//   * a WORKLOAD plugin (one per workload folder): describes buffers, fills inputs from a seed,
//     checks a rank's outputs against a reference it computes independently, and offers "parts"
//     (compute alone, communication alone) that the harness times to report the bound;
//   * a CANDIDATE (one per design point / evolved program): declares its requirements and enqueues
//     one complete operation on ctx->stream.
//
// All entry points are extern "C" and return 0 on success; any other value is an error code that the
// harness reports (a candidate cannot report success any other way: only the harness's JSON counts).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#define CUCO_ABI_VERSION 3
#define CUCO_MAX_BUFFERS 8
#define CUCO_MAX_DIMS 8
#define CUCO_MAX_PARTS 4
#define CUCO_NAME_LEN 32

#ifdef __cplusplus
extern "C" {
#endif

// What a workload buffer is for; decides what the harness does with it before each verified run.
typedef enum {
  CUCO_BUF_INPUT = 0,    // filled by cuco_workload_fill before every verified run
  CUCO_BUF_OUTPUT = 1,   // poisoned (all bytes 0xFF: NaN for floating types) before every verified run, then checked
  CUCO_BUF_SCRATCH = 2,  // poisoned like an output, never checked (e.g. the gathered input of an AllGather)
} cuco_buffer_role;

typedef struct {
  char name[CUCO_NAME_LEN];
  size_t bytes;
  int symmetric;  // 1: ncclMemAlloc + ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC); window set in cuco_buffer
  int role;       // cuco_buffer_role
} cuco_buffer_spec;

typedef struct {
  void* ptr;
  size_t bytes;
  ncclWindow_t window;  // NULL unless the buffer is symmetric
} cuco_buffer;

// What a candidate needs from the harness before ncclDevCommCreate. Zero-initialised by the harness.
typedef struct {
  int lsa_barrier_count;         // >= number of CTAs that open an LSA barrier session, else deadlock
  int gin_signal_count;          // >= number of distinct GIN signal ids used
  int gin_counter_count;
  int gin_context_count;
  int gin_required;              // 1: the candidate uses GIN; the harness reports "unsupported" if GIN is absent
  size_t workspace_bytes;        // plain device scratch, zeroed once at setup
  size_t symmetric_workspace_bytes;  // symmetric scratch (flags, staging), registered as a window, zeroed once
  int uses_nvshmem;              // 1: the candidate is an NVSHMEM program; the harness brings NVSHMEM up (one PE per
                                 // process: world 1, or process mode) and the candidate attaches in its setup
  size_t nvshmem_workspace_bytes;  // symmetric scratch from nvshmem_malloc (same address on every PE), zeroed once
} cuco_requirements;

typedef struct cuco_ctx {
  int abi_version;        // CUCO_ABI_VERSION
  int rank, world;        // global rank and world size
  int local_rank, local_world;
  int device;             // CUDA device ordinal of this rank
  int sm_count;           // multiprocessors on this device

  int ndims;
  int64_t dims[CUCO_MAX_DIMS];  // the workload's problem sizes, e.g. M, K, N

  ncclComm_t comm;              // host communicator (host collectives are legal only in baselines)
  ncclDevComm devcomm;          // device communicator, valid from cuco_candidate_setup on
  int has_devcomm;

  cudaStream_t stream;          // timed stream: the operation starts and ends on it
  cudaStream_t side_stream;     // high-priority stream; the harness joins it into `stream` after launch

  int nbuffers;
  cuco_buffer buffers[CUCO_MAX_BUFFERS];  // in the order of the workload's cuco_buffer_spec list

  void* workspace;              // requirements.workspace_bytes of device memory (library scratch, flags)
  size_t workspace_bytes;
  cuco_buffer symmetric_workspace;  // requirements.symmetric_workspace_bytes, with its window

  uint64_t iteration;           // incremented by the harness before every launch (a host value: a CUDA graph freezes
                                // it, so flag epochs belong in device memory, as cuco/kit/skeleton.cuh keeps them)
  void* candidate_state;        // owned by the candidate (set in setup, freed in teardown)
  void* workload_state;         // owned by the workload plugin

  // NVSHMEM backend (ABI 3): set when the candidate declared uses_nvshmem.
  void* nvshmem_workspace;      // requirements.nvshmem_workspace_bytes from nvshmem_malloc
  size_t nvshmem_workspace_bytes;
  const void* nvshmem_attr;     // the nvshmemx_init_attr_t the host library was brought up with: a candidate's
                                // module attaches its device state with nvshmemx_init_attr(UNIQUEID, attr)
} cuco_ctx;

// ---- candidate entry points -------------------------------------------------------------------------
// Declare device-communicator and scratch requirements. Called once per rank, before devcomm creation;
// ctx->devcomm is not valid yet.
typedef int (*cuco_candidate_requirements_fn)(const cuco_ctx* ctx, cuco_requirements* req);
// One-time, untimed preparation (library handles and plans, events). Optional symbol.
typedef int (*cuco_candidate_setup_fn)(cuco_ctx* ctx);
// Enqueue one complete operation (inputs -> outputs) on ctx->stream (and optionally ctx->side_stream).
// Must not synchronise the host with the device. Timed.
typedef int (*cuco_candidate_launch_fn)(cuco_ctx* ctx);
// Free what setup created. Optional symbol.
typedef int (*cuco_candidate_teardown_fn)(cuco_ctx* ctx);

// ---- workload plugin entry points ---------------------------------------------------------------------
typedef struct {
  int nbuffers;
  cuco_buffer_spec buffers[CUCO_MAX_BUFFERS];
  char error[256];  // set when describe() rejects the dims/world (e.g. "M must be divisible by world")
} cuco_workload_desc;

typedef struct {
  int passed;
  double max_abs_err;
  double rel_l2_err;       // ||out - ref|| / ||ref||
  int64_t n_checked;
  int64_t n_bad;           // elements outside tolerance
  int64_t n_nan;           // NaN/Inf elements (unwritten poison shows up here)
  char message[256];
} cuco_check_result;

// A named piece of the workload timed alone to report the bound ("compute" or "comm").
typedef struct {
  char name[CUCO_NAME_LEN];
  int is_comm;  // 1: communication part, 0: compute part
  int (*launch)(cuco_ctx* ctx);
} cuco_part;

typedef int (*cuco_workload_describe_fn)(const int64_t* dims, int ndims, int world, cuco_workload_desc* out);
typedef int (*cuco_workload_setup_fn)(cuco_ctx* ctx);
typedef int (*cuco_workload_fill_fn)(cuco_ctx* ctx, uint64_t seed);
typedef int (*cuco_workload_check_fn)(cuco_ctx* ctx, uint64_t seed, cuco_check_result* out);
typedef int (*cuco_workload_parts_fn)(const cuco_part** parts, int* nparts);
typedef int (*cuco_workload_teardown_fn)(cuco_ctx* ctx);

#ifdef __cplusplus
}  // extern "C"
#endif

// Symbol names the harness resolves with dlsym.
#define CUCO_SYM_CANDIDATE_REQUIREMENTS "cuco_candidate_requirements"
#define CUCO_SYM_CANDIDATE_SETUP "cuco_candidate_setup"
#define CUCO_SYM_CANDIDATE_LAUNCH "cuco_candidate_launch"
#define CUCO_SYM_CANDIDATE_TEARDOWN "cuco_candidate_teardown"
#define CUCO_SYM_WORKLOAD_DESCRIBE "cuco_workload_describe"
#define CUCO_SYM_WORKLOAD_SETUP "cuco_workload_setup"
#define CUCO_SYM_WORKLOAD_FILL "cuco_workload_fill"
#define CUCO_SYM_WORKLOAD_CHECK "cuco_workload_check"
#define CUCO_SYM_WORKLOAD_PARTS "cuco_workload_parts"
#define CUCO_SYM_WORKLOAD_TEARDOWN "cuco_workload_teardown"
