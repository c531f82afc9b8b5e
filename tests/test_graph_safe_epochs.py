"""Kit-based candidates take their flag epoch on the device, so a launch captured in a CUDA graph replays correctly.

A graph freezes every host-side value of the captured launch. An epoch computed on the host (from ctx->iteration)
and passed to a kernel by value, or to cuStreamWaitValue32 / cuStreamWriteValue32, is the same on every replay: from
the second replay on a consumer finds its flag already at that epoch and reads a peer's data before it lands. The
kit's skeleton keeps the epoch in a device word it advances once per launch (csrc/include/cuco/kit/stream_sync.cuh),
and every kernel and stream wait or set reads it there. These checks read the rendered text of every point of every
workload (and of the fixtures), so a host epoch cannot come back without failing here; the GPU check is
`benchmarks/graph_replay.py` (docs/measuring.md).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from cuco import workloads
from cuco.design_space import Topology
from cuco.graph_safety import strip_comments, host_epoch_problems

KIT = Path(__file__).resolve().parents[1] / "csrc" / "include" / "cuco" / "kit"
NAMES = sorted(workloads.available())

def _all_points(name: str):
    wl = workloads.get(name)
    seen = {}
    for w in (1, 2, 4):
        for p in wl.space(Topology(world=w, nodes=1, gin_available=True, nvshmem_available=True)).points():
            seen.setdefault(p.label(), p)
    return wl, [seen[k] for k in sorted(seen)]


@pytest.mark.parametrize("name", NAMES)
def test_no_rendered_point_passes_a_host_epoch(name):
    wl, points = _all_points(name)
    assert points
    bad = {p.label(): host_epoch_problems(wl.render(p)) for p in points}
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, f"{len(bad)} of {len(points)} {name} points freeze their epoch in a graph: {list(bad.items())[:2]}"


@pytest.mark.parametrize("name", NAMES)
def test_no_fixture_passes_a_host_epoch(name):
    """The wrong candidates are wrong for their own reason (a skipped wait, a wrong page), not a frozen epoch."""
    fixtures = importlib.import_module(f"cuco.workloads.{name}.fixtures")
    texts = {"never_waits": fixtures.never_waits()}
    for label, make in getattr(fixtures, "FIXTURES", {}).items():
        texts[label] = make()
    bad = {k: host_epoch_problems(v) for k, v in texts.items()}
    assert not any(bad.values()), bad


def test_the_guard_catches_the_old_patterns():
    old = [
        "  st->epoch = cuco::lsa::epoch_of(ctx->iteration);",
        "__global__ void wait_kernel(const uint32_t* flag, uint32_t epoch) {}",
        "__global__ void __launch_bounds__(256) put(void* ws, Geo g, uint64_t epoch) {}",
        "  if ((rc = stream_wait_epoch(st, main, &f.chunk[c], st->epoch))) return rc;",
        "  if (st->prev_epoch && (rc = wait_all(ctx, st, cs, SIG_DONE, st->prev_epoch))) return rc;",
        "  ops.wait_value32((CUstream)s, (CUdeviceptr)flag, e, CU_STREAM_WAIT_VALUE_GEQ);",
    ]
    for line in old:
        assert host_epoch_problems(line), line
    new = [
        "__global__ void wait_kernel(const uint32_t* flag, const uint32_t* epoch_at) {}",
        "  if ((rc = stream_wait_epoch(st, main, &f.chunk[c]))) return rc;",
        "  pull_kernel<<<n, 1024, 0, side>>>(dc, f, g, st->epoch_at);",
        "  // comments may name st->epoch and ctx->iteration",
    ]
    for line in new:
        assert not host_epoch_problems(line), line


def test_the_skeleton_advances_a_device_epoch_before_forking_the_side_stream():
    skeleton = strip_comments((KIT / "skeleton.cuh").read_text())
    sync = strip_comments((KIT / "stream_sync.cuh").read_text())
    assert not host_epoch_problems(skeleton) and not host_epoch_problems(sync)
    launch = skeleton[skeleton.index("int launch(cuco_ctx* ctx)"):]
    advance = launch.index("advance_epoch_kernel<<<1, 1, 0, ctx->stream>>>(st->epoch_at)")
    assert advance < launch.index("cudaEventRecord(st->ev_start, ctx->stream)") < launch.index("W::enqueue")
    # The epoch word has its own slot after the block's flags, so the harness zeroes it with them.
    assert "epoch_offset(W::kLibWorkspaceBytes, n) + kEpochSlotBytes" in skeleton
    # Stream waits and sets are kernels that read the word: no host value goes into the stream.
    assert re.search(r"wait_epoch_kernel<<<1, 1, 0, s>>>\(flag, at, back\)", sync)
    assert re.search(r"set_epoch_kernel<<<1, 1, 0, s>>>\(flag, at\)", sync)


@pytest.mark.parametrize("name", NAMES)
def test_a_fast_path_rewrite_is_flagged_as_not_graph_safe(name):
    """The fast path's runtime counts collectives on the host: the check flags it, so an exported fast-path
    candidate is refused in graph capture rather than replayed wrong (KV transfer's fails replay 1 at W = 2)."""
    from cuco.fastpath.analyze import analyze
    from cuco.fastpath.transform import transform

    seed = workloads.get(name).seed_code()
    rewritten = transform(analyze(seed, "seed.cu"), seed).code
    assert any("sequence number" in p for p in host_epoch_problems(rewritten))
