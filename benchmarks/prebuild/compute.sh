#!/usr/bin/env bash
# Runs on a machine without a GPU (not under gpu_env.sh, unlike the scripts of benchmarks/).
# The workloads' compute libraries built here, on a machine without a GPU, so that the GPU machine's compile cache
# finds them instead of spending minutes of device time on them. The cache key names the NCCL and CUTLASS install
# paths and NCCL's version, so this builds under the GPU machine's: NCCL at DEVICE_NCCL (default: where the GPU
# machine's torch environment has it), a link to NCCL_VERSION's wheel (default 2.28.9, the GPU machine's) unpacked
# here, and CUTLASS unpacked from .whl/ into /tmp/site as benchmarks/gpu_env.sh does there. The libraries join
# .devcache/cache.tgz (carried with `carry: [".devcache"]`; gpu_env.sh unpacks it). Run from the repository root,
# which must be at the GPU machine's path too (the key names csrc/include's path).
#   bash benchmarks/prebuild/compute.sh [workload ...]      (default: attention_cp gemm_allgather moe; kv_transfer's
#                                                            library links cuBLASLt, whose path this does not mirror)
set -euo pipefail
DEVICE_NCCL=${DEVICE_NCCL:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl}
NCCL_VERSION=${NCCL_VERSION:-2.28.9}
PY=${PY:-.venv/bin/python}
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(attention_cp gemm_allgather moe)

if [ ! -e "$DEVICE_NCCL" ]; then
  # the key names NCCL's version too: the GPU machine's, from its wheel, whatever this machine's own is
  unpacked=/tmp/nccl-$NCCL_VERSION
  if [ ! -d "$unpacked/nvidia/nccl" ]; then
    "$PY" -m pip download -q --no-deps -d "$unpacked-wheel" "nvidia-nccl-cu13==$NCCL_VERSION"
    "$PY" -m zipfile -e "$unpacked-wheel"/nvidia_nccl_cu13-"$NCCL_VERSION"-*.whl "$unpacked"
  fi
  mkdir -p "$(dirname "$DEVICE_NCCL")" && ln -s "$unpacked/nvidia/nccl" "$DEVICE_NCCL"
  echo "# $DEVICE_NCCL -> $unpacked/nvidia/nccl" >&2
fi
if [ ! -d /tmp/site/cutlass_library ]; then
  if ! ls .whl/nvidia_cutlass*.whl >/dev/null 2>&1; then
    echo "no .whl/nvidia_cutlass*.whl: see benchmarks/gpu_env.sh" >&2
    exit 2
  fi
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/nvidia_cutlass*.whl
fi

cache=$(mktemp -d /tmp/prebuild-cache.XXXX)
mkdir -p "$cache" .devcache
[ -f .devcache/cache.tgz ] && tar xzf .devcache/cache.tgz -C "$cache"
NCCL_HOME="$DEVICE_NCCL" PYTHONPATH="/tmp/site:src" CUCO_CACHE_DIR="$cache" "$PY" - "${workloads[@]}" <<'PYEOF'
import sys, time
from cuco import workloads
from cuco.kit.compute import build_compute
from cuco.toolchain import Toolchain
tc = Toolchain.detect(arch="sm_90", need=("cutlass",))
for name in sys.argv[1:]:
    t = time.monotonic()
    built = build_compute(workloads.get(name), tc)
    print(f"{name}: {built.library.parent.name} ({'cached' if built.cached else f'{time.monotonic() - t:.0f} s'})",
          flush=True)
PYEOF
rm -f "$cache"/compute/*/.lock
tar czf .devcache/cache.tgz -C "$cache" compute && ls -la .devcache/cache.tgz
rm -rf "$cache"
