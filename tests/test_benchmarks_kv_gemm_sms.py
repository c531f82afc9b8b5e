"""benchmarks/kv_gemm_sms.py without a GPU: each beside point is timed both ways and differs only in its plan's SM
count, the controls are rendered as the space renders them, and bad input is refused before anything compiles."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import kv_gemm_sms as kgs  # noqa: E402

from cuco.design_space import Directives, Topology  # noqa: E402
from cuco.workloads.kv_transfer.render import render, render_transfer_path, space  # noqa: E402


@pytest.fixture(scope="module")
def all_codes() -> dict[str, str]:
    return kgs.codes(list(kgs.CONTROLS + kgs.BESIDE))


@pytest.mark.parametrize("world", [1, 2, 4])
def test_every_point_named_is_legal_and_only_the_beside_ones_run_transfer_kernels_beside(world):
    sp = space(Topology(world=world))
    for label in kgs.CONTROLS + kgs.BESIDE:
        point = sp.complete(Directives.from_label(label))
        assert sp.check(point) is None, (label, world)
        # a transfer kernel of kCommCtas CTAs on the side stream, while the compute stream runs the layers
        beside = re.search(r"kGroup,\s*kCommCtas, ss\);", render(point)) is not None
        assert beside == (label in kgs.BESIDE), label


def test_a_beside_point_is_timed_both_ways_differing_in_one_line(all_codes):
    for label in kgs.BESIDE:
        every, spare = all_codes[f"{label}#all"], all_codes[f"{label}#spare"]
        assert every == render(Directives.from_label(label))  # all is the point as the space renders it
        changed = [(a, b) for a, b in zip(every.splitlines(), spare.splitlines()) if a != b]
        assert changed == [("  const int sms = 0;", "  const int sms = ctx->sm_count - kCommCtas;")]


def test_the_controls_plan_every_sm_and_are_timed_once(all_codes):
    for label in kgs.CONTROLS:
        assert all_codes[label] == render(Directives.from_label(label))
        assert "const int sms = 0;" in all_codes[label]
        assert f"{label}#all" not in all_codes and f"{label}#spare" not in all_codes
    assert len(all_codes) == len(kgs.CONTROLS) + 2 * len(kgs.BESIDE)


def test_bad_variants_and_unknown_candidates_are_refused_naming_the_fix():
    code = render(Directives.from_label(kgs.BESIDE[0]))
    with pytest.raises(ValueError, match="unknown variant 'half'"):
        kgs.with_sms(code, "half")
    with pytest.raises(ValueError, match="update this script"):
        kgs.with_sms("__global__ void k() {}", "all")


def test_the_summary_gives_medians_and_spreads():
    runs = [{"host_ms": 1.0, "a_ms": 2.0, "compute_ms": 0.5, "comm_ms": None},
            {"host_ms": 3.0, "a_ms": 2.2, "compute_ms": 0.7, "comm_ms": None},
            {"host_ms": 2.0, "a_ms": None, "compute_ms": 0.6, "comm_ms": None}]
    out = kgs.summary(runs, ["a"])
    assert out["host"] == {"median_ms": 2.0, "spread": 1.0}
    assert out["a"]["median_ms"] == pytest.approx(2.1) and out["a"]["spread"] == pytest.approx(0.2 / 2.1)
    assert out["comm"] == {"median_ms": None, "spread": None}


def test_repeats_below_one_and_odd_worlds_are_refused():
    with pytest.raises(SystemExit, match="at least 1"):
        kgs.main(["--repeats", "0"])
    with pytest.raises(SystemExit, match="use 1 or an even size"):
        kgs.main(["--world", "3"])


def test_transfer_alone_times_each_points_transfer_path_once():
    out = kgs.codes(list(kgs.CONTROLS + kgs.BESIDE), transfer_alone=True)
    assert list(out) == list(kgs.CONTROLS + kgs.BESIDE)
    for label, code in out.items():
        assert code == render_transfer_path(Directives.from_label(label))
        assert "constexpr bool kCompute = false;" in code


def test_transfer_gbps_counts_every_layers_k_and_v():
    # 2 planes x 2048 tokens x 512 x 40 layers x 2 bytes = 167.8 MB in 0.5 ms
    assert kgs.transfer_gbps((2048, 512, 40), 0.5) == pytest.approx(2 * 2048 * 512 * 40 * 2 / 0.5e-3 / 1e9)
    assert kgs.transfer_gbps((2048, 512, 40), None) is None
