"""The four candidate-ABI entry points of a kit-skeleton candidate, as frozen C++ text: each forwards to the
skeleton's template (csrc/include/cuco/kit/skeleton.cuh) for the workload's Candidate type. The static check wants
them written out in the candidate's file, so a workload's frozen tail ends with this text."""

from __future__ import annotations

from cuco.kit.template import fill

_ENTRY_POINTS = r"""extern "C" int cuco_candidate_requirements(const cuco_ctx* ctx, cuco_requirements* req) {
  return cuco::kit::requirements<@TYPE@>(ctx, req);
}

extern "C" int cuco_candidate_setup(cuco_ctx* ctx) { return cuco::kit::setup<@TYPE@>(ctx); }

// One operation: the skeleton forks the side stream off ctx->stream, enqueues the block's work, joins it back.
extern "C" int cuco_candidate_launch(cuco_ctx* ctx) { return cuco::kit::launch<@TYPE@>(ctx); }

extern "C" int cuco_candidate_teardown(cuco_ctx* ctx) { return cuco::kit::teardown<@TYPE@>(ctx); }
"""


def skeleton_entry_points(candidate_type: str) -> str:
    """requirements, setup, launch and teardown with C linkage, each calling cuco::kit's template for
    `candidate_type` (e.g. "cuco_kv::Candidate")."""
    return fill(_ENTRY_POINTS, {"TYPE": candidate_type}, what="candidate entry points")
