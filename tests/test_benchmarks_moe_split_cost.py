"""benchmarks/moe_split_cost.py without a GPU: rank 0's groups in the three ways cover the same rows with the same
experts, the own rows are source 0's, and bad input is refused before the GPU is touched."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import moe_split_cost  # noqa: E402

from cuco.workloads.moe import routing  # noqa: E402


def _rows_by_expert(groups: list[tuple[int, int, int]]) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    seen: set[int] = set()
    for rows, expert, first in groups:
        span = set(range(first, first + rows))
        assert not span & seen  # no row in two groups
        seen |= span
        out.setdefault(expert, set()).update(span)
    return out


@settings(max_examples=60, deadline=None)
@given(world=st.sampled_from([1, 2, 4, 8]), per_rank=st.integers(1, 4), topk=st.integers(1, 2),
       skew=st.integers(1, 5), tokens=st.sampled_from([64, 128, 512]))
def test_every_way_gives_each_expert_the_same_rows(world, per_rank, topk, skew, tokens):
    experts = world * per_rank
    if topk > experts:
        return
    lay = moe_split_cost.rank0_layout(f"{tokens},256,128,{experts},{topk},{skew}", world)
    counts = routing.slot_counts(tokens, experts, topk, skew)[:per_rank]
    assert lay["rows_per_source"] == counts and lay["rows"] == world * sum(counts)
    one = _rows_by_expert(lay["one"])
    assert _rows_by_expert(lay["groups"]) == one
    assert sorted(lay["own"] + lay["peers"]) == sorted(lay["groups"])
    assert set().union(*one.values()) == set(range(lay["rows"]))  # the groups tile the rows
    assert len(lay["own"]) == per_rank and all(rows == counts[x] for rows, x, _ in lay["own"])
    assert len(lay["peers"]) == (world - 1) * per_rank
    # own rows are source 0's: each expert's first rows
    firsts = {x: first for _, x, first in lay["one"]}
    assert all(first == firsts[x] for _, x, first in lay["own"])


def test_the_paper_shape_at_w2_is_two_halves_of_one_expert():
    lay = moe_split_cost.rank0_layout("paper-r1", 2)
    assert lay["one"] == [(4096, 0, 0)] and lay["own"] == [(2048, 0, 0)] and lay["peers"] == [(2048, 0, 2048)]


def test_bad_input_is_refused_before_the_gpu():
    with pytest.raises(ValueError, match="do not split over 4 ranks"):
        moe_split_cost.rank0_layout("paper-r1", 4)  # 2 experts over 4 ranks
    with pytest.raises(SystemExit):
        moe_split_cost.main(["--lib", "/nonexistent.so", "--shapes", "paper-r1"])  # no @W


def test_gpu_w_runs_it_as_a_part_of_its_own():
    """`bash benchmarks/gpu_w.sh 1 moe-split-cost` runs the probe (the library built on the GPU machine itself)."""
    script = (Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_w.sh").read_text()
    part = script.split("\n  moe-split-cost)\n", 1)[1].split(";;", 1)[0]
    assert "benchmarks/moe_split_cost.py --out \"$OUT_DIR/moe_split_cost.json\"" in part and "--lib" not in part
