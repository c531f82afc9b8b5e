#!/usr/bin/env bash
# One device call on 2 GPUs for the persistent-GEMM (fused) placement of GEMM+AllGather: its GPU tests at W = 2
# (every LSA point, the flag-ignoring fixture), torch's anchors, then the design points side by side on six shapes.
#
#   bash benchmarks/gpu_fused_w2.sh OUT_DIR
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu_fused_w2.sh OUT_DIR}
cd "$(dirname "$0")/.."
. benchmarks/gpu_env.sh
mkdir -p "$OUT"
{ device_line
  nvcc --version | tail -1
  timeout 200 python3 -m pytest -m gpu -v -p no:cacheprovider tests/test_workload_gemm_allgather_gpu.py -k "fused or unwritten"
  echo "fixture tests: exit $?"
  timeout "${TEST_TIMEOUT:-200}" python3 -m pytest -m gpu -v -p no:cacheprovider tests/test_workload_gemm_allgather_gpu.py -k lsa_point
  echo "every LSA point: exit $?"; } >"$OUT/fused_gpu_tests.log" 2>&1
timeout 120 python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/torch_anchor.py "$OUT/torch_anchor.json" \
  >"$OUT/torch_anchor.log" 2>&1 || echo "torch anchor: exit $?" >>"$OUT/torch_anchor.log"
timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/gemm_allgather_points.py --world 2 --torch-json "$OUT/torch_anchor.json" \
  --out "$OUT" >"$OUT/points.log" 2>&1; echo "points: exit $?" >>"$OUT/points.log"
tail -n 4 "$OUT/fused_gpu_tests.log" "$OUT/torch_anchor.log"; tail -n 45 "$OUT/points.log"
