#!/usr/bin/env bash
# One resumable part of the multi-GPU runs behind benchmarks/results/, each sized to fit one command on the GPU
# machine (<= 9 minutes); parts can run in any order, and each writes its own log:
#
#   bash benchmarks/gpu_w.sh W PART [OUT_DIR]
#
# PART: env (device, versions, `nvidia-smi topo -m`, measured peer-to-peer GB/s) | build (every workload's compute
# library, in parallel) | tests-<workload> (its GPU tests at world W) | sanitize-<workload> (compute-sanitizer memcheck
# and synccheck over its fast path and best point, benchmarks/sanitize.py) | graph-<workload> (CUDA-graph capture of one
# delayed launch of its fast path, best points and seed, replayed 20 times with fresh inputs and checked each time,
# benchmarks/graph_replay.py) | cache-save / cache-load (the compile cache as OUT_DIR/cache.tgz, or from
# .devcache/cache.tgz carried in) ; workload: gemm_allgather moe kv_transfer attention_cp.
# Environment: TEST_TIMEOUT (seconds, default 520), SAN_TIMEOUT (280), GRAPH_TIMEOUT (400). NVLink multicast stays
# off (benchmarks/gpu_env.sh).
set -uo pipefail
W=${1:?usage: bash benchmarks/gpu_w.sh W PART [OUT_DIR]}
PART=${2:?usage: bash benchmarks/gpu_w.sh W PART [OUT_DIR]}
cd "$(dirname "$0")/.."
OUT_DIR=${3:-benchmarks/results/w$W}
source benchmarks/gpu_env.sh
mkdir -p "$OUT_DIR"

header() {
  device_line
  python3 - <<'PY' 2>/dev/null
import glob, os, nvidia.nccl, torch
print("# nccl wheel:", [os.path.basename(p) for p in glob.glob(os.path.dirname(nvidia.nccl.__file__) + "/../nvidia_nccl*dist-info")],
      "torch", torch.__version__, "cuda", torch.version.cuda)
PY
  echo "# $(nvcc --version | tail -1)"
  echo "# commit $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo '+local changes')"
}

case $PART in
  env)
    { header; nvidia-smi topo -m; python3 benchmarks/p2p_bandwidth.py --world "$W" --json "$OUT_DIR/p2p_w$W.json"
    } 2>&1 | tee "$OUT_DIR/env_w$W.log" ;;
  build)
    { header
      for wl in gemm_allgather moe kv_transfer attention_cp; do
        python3 -c "import sys; from cuco import workloads; from cuco.kit.compute import build_compute; \
from cuco.toolchain import default_toolchain; wl = workloads.get('$wl'); \
b = build_compute(wl, default_toolchain()) if wl.compute else None; print('$wl', b and round(b.seconds, 1))" &
      done
      wait; } 2>&1 | tee "$OUT_DIR/build_w$W.log" ;;
  tests-*)
    wl=${PART#tests-}
    { header
      timeout "${TEST_TIMEOUT:-520}" python3 -m pytest -m gpu "tests/test_workload_${wl}_gpu.py" --world "$W" -v \
        -p no:cacheprovider --durations=10
      echo "gpu tests: exit $?"; } 2>&1 | tee "$OUT_DIR/gpu_tests_${wl}_w$W.log" ;;
  sanitize-*)
    wl=${PART#sanitize-}
    { header
      timeout "${SAN_TIMEOUT:-280}" python3 benchmarks/sanitize.py --workload "$wl" --world "$W" --timeout-s 100 \
        --out "$OUT_DIR/sanitize_${wl}_w$W"
      echo "sanitize: exit $?"; } 2>&1 | tee "$OUT_DIR/sanitize_${wl}_w$W.log" ;;
  graph-*)
    wl=${PART#graph-}
    { header
      timeout "${GRAPH_TIMEOUT:-400}" python3 benchmarks/graph_replay.py --workload "$wl" --world "$W" --replays 20 \
        --timeout-s 100 --out "$OUT_DIR/graph_${wl}_w$W.json"
      echo "graph replay: exit $?"; } 2>&1 | tee "$OUT_DIR/graph_${wl}_w$W.log" ;;
  cache-save)
    tar czf "$OUT_DIR/cache.tgz" -C "$CUCO_CACHE_DIR" . && ls -la "$OUT_DIR/cache.tgz" ;;
  cache-load)
    mkdir -p "$CUCO_CACHE_DIR" && { [ -f .devcache/cache.tgz ] && tar xzf .devcache/cache.tgz -C "$CUCO_CACHE_DIR"; } ;;
  *) echo "unknown part $PART (env, build, tests-<workload>, sanitize-<workload>, graph-<workload>, cache-save," \
       "cache-load)" >&2; exit 2 ;;
esac
