#!/usr/bin/env bash
# GPU tests of the MoE workload's NVSHMEM points: W = min(2, GPUs) (process mode), then W = 1; log into OUT_DIR.
#   bash benchmarks/gpu_moe_nvshmem.sh OUT_DIR
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu_moe_nvshmem.sh OUT_DIR}
cd "$(dirname "$0")/.."
. benchmarks/gpu_env.sh
export NVSHMEM_SYMMETRIC_SIZE=${NVSHMEM_SYMMETRIC_SIZE:-2147483648}
mkdir -p "$OUT"
{ device_line
  timeout "${T2:-200}" python3 -m pytest -m gpu -v -p no:cacheprovider tests/test_workload_moe_gpu.py -k nvshmem
  echo "moe nvshmem (W = min(2, GPUs)): exit $?"
  CUDA_VISIBLE_DEVICES=0 timeout "${T1:-60}" python3 -m pytest -m gpu -v -p no:cacheprovider tests/test_workload_moe_gpu.py -k nvshmem
  echo "moe nvshmem (W = 1): exit $?"; } >"$OUT/moe_nvshmem_gpu_tests.log" 2>&1
tail -n 30 "$OUT/moe_nvshmem_gpu_tests.log"
