"""benchmarks/attention_gather_compute.py without a GPU: the ring's calls and the gathered calls each attend every
query row of a rank to exactly the keys the mask lets it see, each once, and bad input is refused before the GPU."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import attention_gather_compute as agc  # noqa: E402

TILE = agc.KV_TILE


def _mask_pairs(world: int, me: int, sr: int, half: int, causal: bool) -> Counter:
    """(global query, global key) pairs the global mask allows for rank me's queries."""
    s = world * sr
    out: Counter = Counter()
    for i in range(sr):
        gq = agc.global_row(world, me, i, sr, half, causal)
        out.update((gq, j) for j in range(s) if not causal or j <= gq)
    return out


@settings(max_examples=25, deadline=None)
@given(world=st.sampled_from([2, 3, 4, 8]), causal=st.booleans(), data=st.data())
def test_both_schedules_attend_exactly_the_masks_pairs_once(world, causal, data):
    # one KV tile per zigzag chunk keeps the pair sets small; the arithmetic is the same at any multiple
    s = 2 * world * TILE if causal else world * TILE
    me = data.draw(st.integers(0, world - 1))
    sr, half = agc.geometry(s, world, causal)
    want = _mask_pairs(world, me, sr, half, causal)
    for calls in (agc.ring_calls(world, me, sr, half, causal), agc.gathered_calls(world, me, sr, half, causal),
                  agc.hybrid_calls(world, me, sr, half, causal)):
        assert Counter(agc.visible_pairs(calls, world, me, sr, half, causal)) == want


def test_the_gathered_form_is_two_calls_for_causal_and_one_for_full_with_nothing_to_merge():
    sr, half = agc.geometry(8 * 4 * TILE, 4, True)
    calls = agc.gathered_calls(4, 1, sr, half, True)
    assert [(c.q0, c.nq, c.nk, c.mask) for c in calls] == [(0, half, 2 * half, "suffix"),
                                                         (half, half, 7 * half, "suffix")]
    assert not any(c.merged for c in calls)
    ring = agc.ring_calls(4, 1, sr, half, True)
    assert len(ring) == 4 and sum(c.merged for c in ring) == 3


def test_the_hybrid_form_is_the_own_step_then_at_most_two_merged_calls_whatever_w():
    for world in (2, 4, 8):
        sr, half = agc.geometry(2 * world * TILE * 2, world, True)
        for me in range(world):
            calls = agc.hybrid_calls(world, me, sr, half, True)
            assert calls[0] == agc.ring_calls(world, me, sr, half, True)[0]   # the ring's own step, first
            assert 2 <= len(calls) <= 3 and all(c.merged for c in calls[1:])
            # the chunks after its second chunk are needed by none of its queries, so never pulled
            assert len(agc.remote_chunks(world, me)) == 2 * world - 2 - me


def test_bad_input_is_refused_before_the_gpu():
    with pytest.raises(ValueError, match="multiple of 128"):
        agc.geometry(4096 + 64, 2, True)
    for bad in ("s8192-d64", "s8192-d64@1", "nosuch@2", "s4096-d32@64"):
        with pytest.raises(SystemExit):
            agc.main(["--lib", "/nonexistent.so", "--shapes", bad])


def test_llama_rows_run_at_8192_tokens_per_rank():
    assert agc.dims_at("llama3-8b", 4)[0] == 4 * 8192 and agc.dims_at("s8192-d64", 4)[0] == 8192


def test_gpu_w_runs_it_as_a_part_of_its_own():
    """`bash benchmarks/gpu_w.sh 1 attention-gather` runs the probe (the library built on the GPU machine)."""
    script = (Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_w.sh").read_text()
    part = script.split("\n  attention-gather)\n", 1)[1].split(";;", 1)[0]
    assert "benchmarks/attention_gather_compute.py" in part and "--lib" not in part


@given(half=st.integers(1, 9000), hq=st.integers(1, 64), sms=st.integers(17, 200))
def test_the_fitted_split_keeps_the_capped_waves_on_the_fewest_ctas(half, hq, sms):
    tiles = -(-half // 128) * hq
    fit = agc.fit_ctas(half, hq, sms)
    assert 1 <= fit <= sms - agc.COMM_CTAS
    assert agc.waves(tiles, fit) == agc.waves(tiles, sms - agc.COMM_CTAS)
    assert fit == 1 or agc.waves(tiles, fit - 1) > agc.waves(tiles, fit)


def test_the_fitted_split_on_the_sweep_shapes_of_one_h200():
    # 132 SMs, 16 for the pulls: 128 tiles take 2 waves on 116 CTAs and on 64; 256 take 3 on 116 and on 86
    assert agc.fit_ctas(512, 32, 132) == 64 and agc.fit_ctas(1024, 32, 132) == 86
