#!/usr/bin/env bash
# One-GPU check of the workload kit: GEMM+AllGather's GPU tests and the delayed-arrival tests at W = 1,
# `cuco run gemm_allgather --world 1`, and compute-sanitizer (racecheck, synccheck) on the fast-path and best
# points. Logs go to OUT_DIR.
#
#   bash benchmarks/kit_w1_gpu.sh OUT_DIR
#
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0, NVSHMEM_DISABLE_NVLS=1), as on every shared GPU machine.
set -uo pipefail
OUT=${1:?usage: bash benchmarks/kit_w1_gpu.sh OUT_DIR}
cd "$(dirname "$0")/.."
. benchmarks/gpu_env.sh   # NVLink multicast off, PYTHONPATH, the compile cache, device_line
mkdir -p "$OUT"
{ device_line
  python3 -c 'import nvidia.nccl, os; print("# nccl wheel:", os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null
  nvcc --version | tail -1; } > "$OUT/environment.txt"

timeout "${TEST_TIMEOUT:-150}" python3 -m pytest -m gpu -v -p no:cacheprovider --durations=10 \
  tests/test_delayed_arrival_gpu.py tests/test_workload_gemm_allgather_gpu.py -k "not every_lsa_point" \
  >"$OUT/gpu_tests_w1.log" 2>&1
echo "gpu tests: exit $?" >>"$OUT/gpu_tests_w1.log"

timeout "${RUN_TIMEOUT:-150}" python3 -m cuco.cli run gemm_allgather --world 1 --evals "${EVALS:-12}" \
  --run-dir /tmp/cuco-run-w1 --quiet >"$OUT/cuco_run_w1.log" 2>&1
echo "cuco run: exit $?" >>"$OUT/cuco_run_w1.log"

timeout "${SAN_TIMEOUT:-200}" python3 benchmarks/sanitize.py --tools racecheck,synccheck --out "$OUT/sanitize" >"$OUT/sanitize_w1.log" 2>&1
echo "sanitize: exit $?" >>"$OUT/sanitize_w1.log"
