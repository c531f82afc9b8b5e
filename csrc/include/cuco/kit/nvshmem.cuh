// The NVSHMEM backend, candidate side. Including this header makes the program an NVSHMEM program: cuco compiles
// it -rdc=true and links libnvshmem_device.a + libnvshmem_host (cuco.libraries.NVSHMEM).
//
// The harness brings the NVSHMEM host library up (one PE per process, a unique id) and hands out a symmetric
// workspace from nvshmem_malloc; a candidate's module must still attach its own copy of NVSHMEM's device state
// (it lives in every module that links libnvshmem_device.a): `nvshmem_attach(ctx)` in cuco_candidate_setup.
#pragma once

#include <nvshmem.h>
#include <nvshmemx.h>

#include "cuco/abi.h"

namespace cuco {
namespace kit {

// 0 when this module's NVSHMEM device state is ready; 70 when the harness did not bring NVSHMEM up (declare
// uses_nvshmem in cuco_candidate_requirements), 71 when attaching failed.
inline int nvshmem_attach(const cuco_ctx* ctx) {
  if (!ctx->nvshmem_attr) return 70;
  nvshmemx_init_attr_t attr = *static_cast<const nvshmemx_init_attr_t*>(ctx->nvshmem_attr);
  return nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr) == 0 ? 0 : 71;
}

// The harness maps rank r to PE r: a candidate addresses peer rank r as PE r.

}  // namespace kit
}  // namespace cuco
