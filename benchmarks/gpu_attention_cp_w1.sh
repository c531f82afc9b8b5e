#!/usr/bin/env bash
# The one-GPU run behind benchmarks/results/attention_cp_w1.{json,md}, in one device call of at most ~9.5
# minutes: the harness and the ring-attention compute library are built (at once), the workload's GPU tests run
# (compute library against torch, seed / fast path / covering points verify under delayed arrival, every fixture
# fails), then benchmarks/attention_cp.py measures every bench shape (host, best searched point, compute library
# alone, torch SDPA flash / cuDNN). Each step is bounded in time; what a step finished is kept.
#
#   bash benchmarks/gpu_attention_cp_w1.sh OUT_DIR
#
# The package runs from source (PYTHONPATH=src); the CUTLASS headers come from the nvidia-cutlass wheel carried in
# .whl/ (benchmarks/gpu_env.sh says how). Environment: EVALS (search evaluations per
# shape, default 6), SHAPES (comma list), BUILD_TIMEOUT / TEST_TIMEOUT (seconds), TOTAL_S (the whole budget),
# STEPS ("tests bench" by default; "tests" or "bench" alone splits the call, e.g. to run other untimed work beside
# the tests and keep the GPU to the benchmark alone).
# NVLink multicast stays off (benchmarks/gpu_env.sh).
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu_attention_cp_w1.sh OUT_DIR}
cd "$(dirname "$0")/.."
source benchmarks/gpu_env.sh
TOTAL_S=${TOTAL_S:-570}
mkdir -p "$OUT/results"
{ device_line
  nvcc --version | tail -1
  python3 -c 'import torch; print("# torch", torch.__version__, "cuda", torch.version.cuda)'
  python3 -c 'from cuco.libraries import spec_of, find; print("# cutlass:", find(spec_of("cutlass"), None).include)'
} >"$OUT/env.txt" 2>&1
STEPS=${STEPS:-tests bench}
[[ $STEPS == *tests* ]] && { timeout "${BUILD_TIMEOUT:-240}" python3 -c '
from concurrent.futures import ThreadPoolExecutor
from cuco.harness.build import harness_binary
from cuco.kit.compute import build_compute
from cuco.toolchain import default_toolchain
from cuco.workloads import get
with ThreadPoolExecutor(2) as pool:
    lib = pool.submit(build_compute, get("attention_cp"), default_toolchain())
    print("harness:", harness_binary())
    b = lib.result()
print("compute library:", b.library, "cached" if b.cached else f"built in {b.seconds:.0f} s")'
  echo "builds: exit $?"
  timeout "${TEST_TIMEOUT:-200}" python3 -m pytest -m gpu -v -p no:cacheprovider --durations=10 \
    tests/test_workload_attention_cp_gpu.py
  echo "gpu tests: exit $?"; } >"$OUT/attention_cp_gpu_tests.log" 2>&1
left=$((TOTAL_S - SECONDS))
[[ $STEPS == *bench* ]] && { echo "# benchmark budget: ${left} s"
  timeout "$left" python3 benchmarks/attention_cp.py --evals "${EVALS:-6}" --out "$OUT/results" \
    ${SHAPES:+--shapes "$SHAPES"}
  echo "benchmark: exit $?"; } >"$OUT/attention_cp_bench.log" 2>&1
tail -4 "$OUT/attention_cp_gpu_tests.log" "$OUT/attention_cp_bench.log" 2>/dev/null
