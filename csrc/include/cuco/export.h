// C interface of an exported candidate (csrc/export/exported_op.cpp), loaded by cuco.export.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuco_op cuco_op;

// The last failure's message (this thread's library state; valid until the next call).
const char* cuco_op_error(void);
// A fresh NCCL unique id as 256 hex digits (+ NUL) in hex[n >= 257]: rank 0 makes it, the job hands it to all.
int cuco_op_unique_id(char* hex, size_t n);
// Join the job's rank `rank` of `world` (NCCL unique id as 256 hex digits, the same on every rank), allocate the
// workload's buffers for `dims`, set the candidate up. Collective: every rank calls it. 0 on success; on failure
// *out may hold a partly built op: pass it to cuco_op_close.
int cuco_op_open(const char* plugin_so, const char* candidate_so, const int64_t* dims, int ndims, int rank, int world,
                 const char* unique_id_hex, int device, cuco_op** out);
// Fill the input buffers with the harness's seeded inputs (the workload plugin's fill), on `stream`: to time the op
// on the data the harness timed it on.
int cuco_op_fill_inputs(cuco_op* op, uint64_t seed, cudaStream_t stream);
int cuco_op_nbuffers(const cuco_op* op);
int cuco_op_buffer(const cuco_op* op, int i, void** ptr, size_t* bytes, int* role, int* symmetric, const char** name);
// One operation on `stream` (the caller's); the candidate's side stream is forked from it and joined back.
// Capturable in a CUDA graph when the candidate's launch is.
int cuco_op_launch(cuco_op* op, cudaStream_t stream);
// Free everything (collective: every rank calls it).
int cuco_op_close(cuco_op* op);

#ifdef __cplusplus
}
#endif
