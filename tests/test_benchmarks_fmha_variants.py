"""benchmarks/fmha_variants.py without a GPU: binary names, shapes, the choice of the fastest matching variant, the
table, and refusals of bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import fmha_variants  # noqa: E402


def test_the_sweep_needs_four_binaries_one_per_head_dim_and_mask():
    dims = fmha_variants.shape_dims(fmha_variants.SHAPES)
    assert [n for n, _ in dims] == fmha_variants.SHAPES.split(",")
    names = {fmha_variants.binary_name(d["D"], d["CAUSAL"]) for _, d in dims}
    assert names == {"fmha_variants_d32_causal", "fmha_variants_d64_causal", "fmha_variants_d128_causal",
                     "fmha_variants_d128_full"}


def _variant(name, ms, diff=0.0):
    return {"variant": name, "status": 0, "ms": ms, "o_max_rel_diff": diff}


@given(st.lists(st.tuples(st.floats(0.05, 5.0), st.floats(0.0, 0.05)), min_size=1, max_size=5))
def test_the_fastest_variant_is_the_fastest_whose_output_matches_the_library(others):
    variants = [_variant("library", 1.0), _variant("library_bf16", 0.01)]
    variants += [_variant(f"v{i}", ms, diff) for i, (ms, diff) in enumerate(others)]
    row = fmha_variants.summarize("s8192-d64", {"D": 64}, variants, {"anchor_ms": 0.8, "anchor_backend": "cudnn"})
    matching = {v["variant"]: v["ms"] for v in variants
                if v["variant"] != "library_bf16" and v["o_max_rel_diff"] <= fmha_variants.MAX_REL_DIFF}
    assert row["best_ms"] == min(matching.values())
    assert row["best_variant"] != "library_bf16"  # another output type is not a candidate for the fp32 path
    assert row["library_vs_torch"] == pytest.approx(0.8)
    assert row["best_vs_torch"] == pytest.approx(0.8 / row["best_ms"])


def test_a_failed_variant_and_a_missing_binary_are_rows_with_their_reason(tmp_path):
    rows = fmha_variants.run_binary(tmp_path / "absent", {"S": 128, "HQ": 1, "HKV": 1}, 1)
    assert rows[0]["variant"] == "*" and "fmha_variants.py build" in rows[0]["error"]
    row = fmha_variants.summarize("x", {}, [{"variant": "library", "status": 2}], {})
    assert row["library_ms"] is None and row["best_variant"] is None and "library_vs_torch" not in row
    table = fmha_variants.markdown({"device": "d", "torch": "t", "date": "now", "rows": [row]})
    assert "| x | - | - | None - |" in table


def test_an_unknown_shape_is_refused_before_any_build():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fmha_variants.py"), "build", "--shapes",
                          "s9999-d48", "--out", "/nonexistent/never"], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "--shapes:" in out.stderr and "s9999-d48" in out.stderr
