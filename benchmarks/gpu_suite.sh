#!/usr/bin/env bash
# The GPU-machine run behind benchmarks/results/: the GEMM+AllGather benchmark (torch's anchors, then cuco's
# offline search per shape, all timed by the cuco harness) and the GPU test suite, each step bounded in time.
#
#   bash benchmarks/gpu_suite.sh OUT_DIR [bench|tests|all]
#
# Environment: WORLD (ranks = GPUs, default 2), EVALS (search evaluations per shape, default 24), BENCH_TIMEOUT / TEST_TIMEOUT (seconds).
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0, NVSHMEM_DISABLE_NVLS=1), as on every shared GPU machine.
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu_suite.sh OUT_DIR [bench|tests|all]}
WHAT=${2:-all}
cd "$(dirname "$0")/.."
source benchmarks/gpu_env.sh   # the environment of every GPU run, and CUTLASS's headers from a carried .whl/
mkdir -p "$OUT"

environment() {
  echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)" \
       "x$(nvidia-smi -L | wc -l); date: $(date -u +%FT%TZ)"
  python3 -c 'import nvidia.nccl, os, glob; print("# nccl wheel:", glob.glob(os.path.dirname(nvidia.nccl.__file__) + "/../nvidia_nccl*dist-info"))' 2>/dev/null
  nvcc --version | tail -1
}

if [[ $WHAT == bench || $WHAT == all ]]; then
  timeout 150 python3 -m torch.distributed.run --nproc_per_node "${WORLD:-2}" benchmarks/torch_anchor.py \
    "$OUT/torch_anchor.json" >"$OUT/torch_anchor.log" 2>&1 || echo "torch anchor: exit $?" >>"$OUT/torch_anchor.log"
  { environment
    timeout "${BENCH_TIMEOUT:-420}" python3 benchmarks/gemm_allgather.py --world "${WORLD:-2}" --evals "${EVALS:-24}" \
      --torch-json "$OUT/torch_anchor.json" --out "$OUT"
    echo "benchmark: exit $?"; } 2>&1 | tee "$OUT/bench.log"
fi

if [[ $WHAT == tests || $WHAT == all ]]; then
  { environment
    timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -m gpu -v -p no:cacheprovider --durations=15
    echo "gpu tests: exit $?"; } 2>&1 | tee "$OUT/gpu_tests.log"
fi
