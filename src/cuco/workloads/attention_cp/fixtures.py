"""Wrong candidates that verification must reject (used by the GPU tests of the harness's checks).

Each is a rendered point with one deliberate fault; each fails at any W, W = 1 included:
- skipped_step: the last ring step is never attended (at W = 1 the only one: the output stays poisoned);
- merge_without_lse: partial results are averaged instead of weighted by their log-sum-exps (the slice pipeline
  merges even at W = 1);
- never_waits: the attention reads each slice without waiting for its landed flag, while the transfers (the own
  block's included) are delayed on the side stream;
- gathered_never_waits: the gathered form's calls read the region without waiting for any source's landed flag
  (the own rows, delayed on the side stream, included);
- gathered_fused_never_waits: the same for the FMHA that waits inside the kernel (no arrival given).
"""

from __future__ import annotations

from cuco.design_space import Directives
from cuco.workloads.attention_cp.render import render

#: The slice pipeline: every block, the own one included, moves on the side stream, so W = 1 has a race to lose;
#: 1 MiB slices give several merges per block at verify-gqa-causal (a 4 MiB block).
FUSED_BASE = "lsa/fused/signal/cta/1MiB/attend=ring"
STEPS_BASE = "lsa/stream_overlap/signal/cta/whole/attend=ring"
#: The gathered form: the own rows move into the region on the side stream too, so W = 1 has a race to lose.
GATHERED_BASE = "lsa/stream_overlap/signal/cta/whole/attend=gathered"
#: The gathered form whose FMHA waits inside the kernel (placement=fused).
GATHERED_FUSED_BASE = "lsa/fused/signal/cta/whole/attend=gathered"

_STEP_LOOP = "  for (int s = 0; s < g.W; ++s) {\n    const int src = source_at(ctx->rank, s, g.W);\n"
_FLAG_WAIT = "      if ((rc = stream_wait_epoch(st, main, &f.local[f.lf.chunk(src, c)]))) return rc;\n"
_SOURCE_WAIT = "      if ((rc = stream_wait_epoch(st, main, &f.local[f.lf.chunk(src, 0)]))) return rc;  // src's rows landed\n"
_MERGE_CALL = "cuco_attn_merge_f32, main)"

BAD_MERGE = r"""
// Wrong on purpose: averages the fp32 partial outputs (into the fp32 running output), ignoring their log-sum-exps.
__global__ void average_kernel(float* o, const float* ob, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    o[i] = 0.5f * (o[i] + ob[i]);
}
static int merge_average(void* o, float*, const void* ob, const float*, int64_t rows, int heads, int head_dim,
                         int64_t, cudaStream_t s) {
  average_kernel<<<1024, 256, 0, s>>>((float*)o, (const float*)ob, rows * heads * head_dim);
  return launch_ok();
}
"""


def _point(label: str) -> str:
    return render(Directives.from_label(label))


def _replace_once(code: str, old: str, new: str, base: str) -> str:
    if code.count(old) != 1:
        raise AssertionError(f"the {base} template changed ({old.strip()[:40]!r} is not there once): update the "
                             "attention_cp fixtures")
    return code.replace(old, new)


def skipped_step() -> str:
    """A candidate that never attends to the block of its last ring step."""
    code = _point(STEPS_BASE)
    return _replace_once(code, _STEP_LOOP, _STEP_LOOP + "    if (s == g.W - 1) continue;  // skips one step\n",
                         STEPS_BASE)


def merge_without_lse() -> str:
    """A candidate whose merge averages partial outputs instead of weighting them by exp(LSE)."""
    code = _point(FUSED_BASE)
    if code.count(_MERGE_CALL) != 1:
        raise AssertionError(f"the {FUSED_BASE} template changed: update the merge-without-LSE fixture")
    marker = "// placement=fused (chunk-pipelined)"  # inside the block's namespace cuco_cp
    code = _replace_once(code, marker, BAD_MERGE.lstrip("\n") + marker, FUSED_BASE)
    return code.replace(_MERGE_CALL, "merge_average, main)")


def never_waits() -> str:
    """A candidate whose attention reads each slice without waiting for it to land."""
    return _replace_once(_point(FUSED_BASE), _FLAG_WAIT, "      // never waits for the slice to land\n", FUSED_BASE)


def gathered_never_waits() -> str:
    """A gathered-form candidate whose calls read the region without waiting for the rows to land."""
    return _replace_once(_point(GATHERED_BASE), _SOURCE_WAIT, "      // never waits for src's rows\n", GATHERED_BASE)


def gathered_fused_never_waits() -> str:
    """A gathered-form candidate whose FMHA is given no arrival flags: it reads the region at once."""
    return _replace_once(_point(GATHERED_FUSED_BASE), "main, &arrival, fmha_ctas",
                         "main, nullptr, fmha_ctas /* never waits */", GATHERED_FUSED_BASE)
