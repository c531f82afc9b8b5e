#!/usr/bin/env bash
# GPU tests of the harness's process-per-rank mode (thread vs process agreement, hang containment) and the
# GEMM+AllGather fused-placement points at W = 2 after the swizzle change; logs into OUT_DIR.
#   bash benchmarks/gpu_process_mode.sh OUT_DIR
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu_process_mode.sh OUT_DIR}
cd "$(dirname "$0")/.."
. benchmarks/gpu_env.sh
mkdir -p "$OUT"
{ device_line
  timeout 240 python3 -m pytest -m gpu -v -s -p no:cacheprovider tests/test_harness_process_gpu.py
  echo "process-mode tests (W = min(2, GPUs)): exit $?"
  CUDA_VISIBLE_DEVICES=0 timeout 150 python3 -m pytest -m gpu -v -s -p no:cacheprovider tests/test_harness_process_gpu.py -k agree
  echo "process-mode tests (W = 1): exit $?"; } >"$OUT/process_mode_gpu_tests.log" 2>&1
if [[ $(nvidia-smi -L | wc -l) -ge 2 ]]; then
  timeout "${BENCH_TIMEOUT:-200}" python3 benchmarks/gemm_allgather_points.py --world 2 \
    --points 'lsa/fused/signal/cta/4MiB;lsa/fused/signal/cta/16MiB;lsa/stream_overlap/team/copy_engine/whole' \
    --out "$OUT" >"$OUT/points.log" 2>&1; echo "points: exit $?" >>"$OUT/points.log"
fi
tail -n 30 "$OUT/process_mode_gpu_tests.log"; tail -n 25 "$OUT/points.log" 2>/dev/null
