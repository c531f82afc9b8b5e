#!/usr/bin/env bash
# The one-GPU run behind benchmarks/results/kv_transfer_w1.{json,md}, in three device calls of under 10 minutes
# (each search compiles its candidates once per machine, and a fresh machine starts with an empty cache):
#
#   bash benchmarks/gpu_kv_transfer_w1.sh a   # the workload's GPU tests, then S = 2048 (x KV 512/768/1024)
#   bash benchmarks/gpu_kv_transfer_w1.sh b   # S = 3072 and 4096 (x KV 512/768/1024)
#   bash benchmarks/gpu_kv_transfer_w1.sh c   # the long prompt (S = 32768): the best points of s4096-kv1024 re-timed
#
# Each call merges its rows into the results file by shape, and call c reads s4096-kv1024's timed points from it, so
# copy each call's results/kv_transfer_w1.{json,md} into benchmarks/results/ before the next. Logs and results go to $OUT
# (or OUT_DIR): env.txt, kv_gpu_tests.log, kv_bench_<part>.log, results/kv_transfer_w1.{json,md}.
# CUTLASS's headers come from the nvidia-cutlass wheel carried in .whl/ (benchmarks/gpu_env.sh says how).
# Environment: SHAPES (overrides the part's list), EVALS (search evaluations per shape, default 6), TEST_TIMEOUT /
# BENCH_TIMEOUT (seconds; the results file is written after every shape). NVLink multicast stays off (gpu_env.sh).
set -uo pipefail
PART=${1:-a}
cd "$(dirname "$0")/.."
DEST=${OUT:-${OUT_DIR:-/tmp/kv-transfer-out}}
source benchmarks/gpu_env.sh
mkdir -p "$DEST/results"
{ device_line
  nvcc --version | tail -1
  python3 -c 'import torch; print("# torch", torch.__version__, "cuda", torch.version.cuda)'
  python3 -m pip show nvidia-nccl-cu13 nvidia-cutlass 2>/dev/null | grep -E '^(Name|Version)'; } >"$DEST/env.txt" 2>&1
if [ "$PART" = a ]; then
  { timeout "${TEST_TIMEOUT:-240}" python3 -m pytest -m gpu -v -p no:cacheprovider --durations=10 \
      tests/test_workload_kv_transfer_gpu.py
    echo "gpu tests: exit $?"; } >"$DEST/kv_gpu_tests.log" 2>&1
  DEFAULT=s2048-kv512,s2048-kv768,s2048-kv1024 BUDGET=320
elif [ "$PART" = b ]; then
  DEFAULT=s3072-kv512,s3072-kv768,s3072-kv1024,s4096-kv512,s4096-kv768,s4096-kv1024 BUDGET=560
else
  DEFAULT=long BUDGET=560
fi
{ timeout "${BENCH_TIMEOUT:-$BUDGET}" python3 benchmarks/kv_transfer.py --shapes "${SHAPES:-$DEFAULT}" \
    --evals "${EVALS:-6}" --out benchmarks/results
  echo "benchmark: exit $?"; } >"$DEST/kv_bench_$PART.log" 2>&1
cp benchmarks/results/kv_transfer_w1.json benchmarks/results/kv_transfer_w1.md "$DEST/results/" 2>/dev/null
tail -4 "$DEST/kv_gpu_tests.log" "$DEST/kv_bench_$PART.log" 2>/dev/null
cat benchmarks/results/kv_transfer_w1.md 2>/dev/null
