// The opening of a workload plugin's cuco_workload_describe: the number of dims, then the workload's own shape
// check, each refusal written into out->error for the harness to print (so a bad shape is named before any buffer
// is allocated).
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuco/abi.h"

namespace cuco {
namespace kit {

// Clears `out`; true (and out->error set) when `dims` is refused: `ndims` is not `want` (`usage` names the dims,
// e.g. "moe takes 6 dims T,H,I,E,K,R"), or `why(dims, world)` names a violated constraint.
inline bool describe_refuses(cuco_workload_desc* out, const char* usage, int want, const int64_t* dims, int ndims,
                             int world, const char* (*why)(const int64_t*, int)) {
  memset(out, 0, sizeof(*out));
  if (ndims != want) {
    snprintf(out->error, sizeof(out->error), "%s; got %d", usage, ndims);
    return true;
  }
  if (const char* reason = why(dims, world)) {
    snprintf(out->error, sizeof(out->error), "%s", reason);
    return true;
  }
  return false;
}

}  // namespace kit
}  // namespace cuco
