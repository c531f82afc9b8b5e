# Sourced by the GPU-machine scripts (from the repository root): the environment every GPU run here uses, and
# the device header line of a log. NVLink multicast stays off (NCCL_NVLS_ENABLE=0, NVSHMEM_DISABLE_NVLS=1).
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1
export NVSHMEM_REMOTE_TRANSPORT=${NVSHMEM_REMOTE_TRANSPORT:-none}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export CUCO_CACHE_DIR=${CUCO_CACHE_DIR:-/tmp/cuco-cache}
# The compile cache carried in (.devcache/cache.tgz: `gpu_w.sh W cache-save` on an earlier machine, or
# benchmarks/prebuild/compute.sh on a machine without a GPU) unpacked into CUCO_CACHE_DIR; entries are keyed by
# sources, toolchain and paths, so a stale one is never used.
unpack_cache() {
  [ -f .devcache/cache.tgz ] || return 0
  mkdir -p "$CUCO_CACHE_DIR" && tar xzf .devcache/cache.tgz -C "$CUCO_CACHE_DIR" \
    && echo "# compile cache: .devcache/cache.tgz unpacked into $CUCO_CACHE_DIR" >&2
}
# A fresh machine (the last one was given back between two calls) gets the carried compute libraries at once, not
# only through `gpu_w.sh W cache-load`: without them a GPU test file spends its minutes compiling.
[ -d "$CUCO_CACHE_DIR/compute" ] || unpack_cache

device_line() {
  echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)" \
       "x$(nvidia-smi -L | wc -l); date: $(date -u +%FT%TZ)"
}

# Python packages the GPU machine lacks come from wheels carried in .whl/ (git-ignored), unpacked into /tmp/site:
# CUTLASS's headers (the compute libraries of moe, kv_transfer and attention_cp) from nvidia-cutlass, and the fast
# path's C++ parser from tree-sitter and tree-sitter-cpp (CPython 3.12 wheels). Here, once:
#   mkdir -p .whl && pip download --no-deps -d .whl nvidia-cutlass==4.2.0.0 && pip download --no-deps -d .whl \
#     --python-version 3.12 --only-binary=:all: --platform manylinux_2_28_x86_64 tree-sitter==0.26.1 tree-sitter-cpp==0.23.4
# then `carry: [".whl"]`.
export PYTHONPATH="$PYTHONPATH:/tmp/site"
for need in cutlass_library:nvidia_cutlass tree_sitter:tree_sitter-0 tree_sitter_cpp:tree_sitter_cpp; do
  module=${need%%:*} wheel=${need#*:}
  python3 -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$module') is None)" && continue
  if ! { ls .whl/$wheel*.whl >/dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps --no-compile \
           --no-cache-dir --upgrade --target /tmp/site .whl/$wheel*.whl; }; then
    echo "# $module is missing: carry .whl/ with its wheel (see benchmarks/gpu_env.sh)" >&2
  fi
done
