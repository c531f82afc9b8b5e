#!/usr/bin/env bash
# The GPU-machine run behind benchmarks/results/moe_w*.{json,md}: the MoE GPU tests (every point verifies under
# delayed arrival, the broken fixtures fail), then benchmarks/moe.py (search per shape, exhaustive sweep, bound
# parts, torch anchor), each step bounded in time.
#
#   bash benchmarks/moe_suite.sh OUT_DIR
#
# Environment: WORLD (ranks, default: every GPU), EVALS (search evaluations per shape, default 8),
# TEST_TIMEOUT / BENCH_TIMEOUT (seconds), TESTS_K (pytest -k selection). NVLink multicast stays off.
set -uo pipefail
OUT=${1:?usage: bash benchmarks/moe_suite.sh OUT_DIR}
cd "$(dirname "$0")/.."
. benchmarks/gpu_env.sh   # NVLink multicast off, PYTHONPATH, the compile cache, device_line
mkdir -p "$OUT/results"
{ echo "# device: $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | head -1)" \
       "x$(nvidia-smi -L | wc -l); date: $(date -u +%FT%TZ)"
  nvcc --version | tail -1
  python3 -c 'import torch; print("# torch", torch.__version__, "cuda", torch.version.cuda)'; } >"$OUT/env.txt" 2>&1
{ timeout "${TEST_TIMEOUT:-170}" python3 -m pytest -m gpu -v -p no:cacheprovider --durations=10 \
    -k "${TESTS_K:-}" tests/test_workload_moe_gpu.py
  echo "gpu tests: exit $?"; } >"$OUT/moe_gpu_tests.log" 2>&1
{ timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/moe.py --world "${WORLD:-0}" --evals "${EVALS:-8}" \
    --out "$OUT/results"
  echo "benchmark: exit $?"; } >"$OUT/moe_bench.log" 2>&1
tail -5 "$OUT/moe_gpu_tests.log" "$OUT/moe_bench.log"
