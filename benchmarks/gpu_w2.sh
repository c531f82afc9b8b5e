#!/usr/bin/env bash
# One device call on 2 GPUs: GEMM+AllGather benchmark (six shapes, torch anchors), MoE benchmark, then the GPU test
# suite, each step bounded so the whole fits one call; everything lands in OUT_DIR/w2 and one archive.
#
#   bash benchmarks/gpu_w2.sh OUT_DIR
#
# Environment: AG_EVALS, MOE_EVALS (search evaluations per shape), AG_TIMEOUT, MOE_TIMEOUT, TEST_TIMEOUT (seconds).
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu_w2.sh OUT_DIR}
cd "$(dirname "$0")/.."
. benchmarks/gpu_env.sh   # NVLink multicast off, PYTHONPATH, the compile cache, device_line
W="$OUT/w2"
mkdir -p "$W/ag" "$W/moe"
WORLD=2 EVALS=${AG_EVALS:-8} BENCH_TIMEOUT=${AG_TIMEOUT:-180} bash benchmarks/gpu_suite.sh "$W/ag" bench
{ timeout "${MOE_TIMEOUT:-150}" python3 benchmarks/moe.py --world 2 --evals "${MOE_EVALS:-6}" --sweep '' \
    --out "$W/moe"
  echo "moe benchmark: exit $?"; } >"$W/moe/bench.log" 2>&1
TEST_TIMEOUT=${TEST_TIMEOUT:-150} WORLD=2 bash benchmarks/gpu_suite.sh "$W/tests" tests
tar czf "$OUT/w2.tgz" -C "$OUT" w2
tail -n 3 "$W/ag/bench.log" "$W/moe/bench.log" "$W/tests/gpu_tests.log"
