#!/usr/bin/env bash
# GPU tests of the NVSHMEM backend (GEMM+AllGather): W = min(2, GPUs) in process mode, then W = 1 in thread mode,
# plus the process-mode harness tests; logs into OUT_DIR.   bash benchmarks/gpu_nvshmem.sh OUT_DIR
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu_nvshmem.sh OUT_DIR}
cd "$(dirname "$0")/.."
. benchmarks/gpu_env.sh
export NVSHMEM_SYMMETRIC_SIZE=${NVSHMEM_SYMMETRIC_SIZE:-2147483648}
mkdir -p "$OUT"
{ device_line
  python3 -m pip list 2>/dev/null | grep -i "nvshmem\|nccl"
  timeout 330 python3 -m pytest -m gpu -v -p no:cacheprovider tests/test_workload_gemm_allgather_gpu.py -k nvshmem
  echo "nvshmem tests (W = min(2, GPUs)): exit $?"
  CUDA_VISIBLE_DEVICES=0 timeout 150 python3 -m pytest -m gpu -v -p no:cacheprovider \
    tests/test_workload_gemm_allgather_gpu.py -k "nvshmem_points"
  echo "nvshmem tests (W = 1): exit $?"; } >"$OUT/nvshmem_gpu_tests.log" 2>&1
tail -n 40 "$OUT/nvshmem_gpu_tests.log"
