#!/usr/bin/env bash
# 2 GPUs: NVSHMEM points of GEMM+AllGather beside their LSA counterpart and the best split point, through the cascade
# (verified under delayed arrival, then timed; process mode because NVSHMEM runs one PE per process).
#   bash benchmarks/gpu_nvshmem_points.sh OUT_DIR
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu_nvshmem_points.sh OUT_DIR}
cd "$(dirname "$0")/.."
. benchmarks/gpu_env.sh
export NVSHMEM_SYMMETRIC_SIZE=${NVSHMEM_SYMMETRIC_SIZE:-4294967296}
mkdir -p "$OUT"
timeout "${BENCH_TIMEOUT:-420}" python3 benchmarks/gemm_allgather_points.py --world 2 \
  --shapes '8192,8192,8192;16384,8192,3584;4096,4096,4096' \
  --points 'nvshmem/split_put_wait/signal/cta/4MiB;nvshmem/split_put_wait/signal/warp/4MiB;nvshmem/split_put_wait/signal/cta/16MiB;lsa/split_put_wait/signal/cta/4MiB;lsa/stream_overlap/team/copy_engine/whole' \
  --out "$OUT" >"$OUT/nvshmem_points.log" 2>&1; echo "points: exit $?" >>"$OUT/nvshmem_points.log"
tail -n 25 "$OUT/nvshmem_points.log"
