#!/usr/bin/env bash
# One GPU: the timeline GPU test, then a small measured run of GEMM+AllGather at W = 1 whose end writes the report
# and the CUPTI timelines of the host program and the best candidates. Everything lands in OUT_DIR (run.tgz).
#   bash benchmarks/gpu_report.sh OUT_DIR
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu_report.sh OUT_DIR}
cd "$(dirname "$0")/.."
. benchmarks/gpu_env.sh
mkdir -p "$OUT"
{ device_line
  timeout 200 python3 -m pytest -m gpu -v -s -p no:cacheprovider tests/test_report_timeline.py
  echo "timeline GPU test: exit $?"
  timeout 300 python3 -m cuco.cli run gemm_allgather --world 1 --shape 4096,4096,4096 --evals 6 --quiet \
    --run-dir "$OUT/run"
  echo "cuco run: exit $?"; } >"$OUT/report_gpu.log" 2>&1
tar czf "$OUT/run.tgz" -C "$OUT" run
tail -n 40 "$OUT/report_gpu.log"
