"""The harness's input distributions (cuco/gen.cuh), computed by the same header on the CPU: 256 levels for a
plain seed; full-entropy bf16 of the same variance for a seed with the top bit set, every value exact in bf16 so
fill and reference agree bit for bit."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cuco.harness import include_dir
from cuco.toolchain import ToolchainError, default_toolchain

PROGRAM = r"""
#include <cstdio>
#include <cstring>
#include <set>
#include "cuco/gen.cuh"
int main() {
  for (int full = 0; full < 2; ++full) {
    const uint64_t seed = 7 | (full ? cuco::kFullEntropySeed : 0);
    double sum = 0, sq = 0, lo = 1e9, hi = -1e9;
    int not_bf16 = 0;
    std::set<uint32_t> distinct;
    const int n = 1 << 20;
    for (int i = 0; i < n; ++i) {
      float v = cuco::gen_value(seed, 1, 2, (uint64_t)i);
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      not_bf16 += (bits & 0xFFFF) != 0;
      distinct.insert(bits);
      sum += v, sq += (double)v * v, lo = v < lo ? v : lo, hi = v > hi ? v : hi;
    }
    std::printf("%s{\"mean\": %.9g, \"var\": %.9g, \"lo\": %.9g, \"hi\": %.9g, \"not_bf16\": %d, \"distinct\": %zu}",
                full ? ", " : "[", sum / n, sq / n - (sum / n) * (sum / n), lo, hi, not_bf16, distinct.size());
  }
  std::printf("]\n");
}
"""


@pytest.fixture(scope="module")
def stats(tmp_path_factory) -> list[dict]:
    try:
        tc = default_toolchain()
    except ToolchainError as exc:
        pytest.skip(f"no CUDA toolchain: {exc}")
    d: Path = tmp_path_factory.mktemp("gen")
    src = d / "gen_stats.cu"
    src.write_text(PROGRAM)
    out = tc.compile([src], d / "gen_stats", shared=False, include_dirs=[include_dir()])
    assert out.ok, out.log[-2000:]
    run = subprocess.run([str(d / "gen_stats")], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(run.stdout)


def test_plain_seeds_give_256_levels_in_minus_one_to_one(stats):
    q = stats[0]
    assert q["distinct"] == 256 and q["lo"] == -1.0 and q["hi"] == 127 / 128 and q["not_bf16"] == 0


def test_full_entropy_seeds_give_many_exact_bf16_values_of_the_same_variance(stats):
    q, full = stats
    assert full["not_bf16"] == 0                    # exact in bf16: fill and reference agree
    assert full["distinct"] > 8 * q["distinct"]    # every mantissa bit in play, not 256 levels
    assert abs(full["var"] - 1 / 3) < 0.01 and abs(q["var"] - 1 / 3) < 0.01
    assert abs(full["mean"]) < 0.01 and -2 <= full["lo"] and full["hi"] <= 2
