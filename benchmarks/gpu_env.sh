# Sourced by the GPU-machine scripts (from the repository root): the environment every GPU run here uses, and
# the device header line of a log. NVLink multicast stays off (NCCL_NVLS_ENABLE=0, NVSHMEM_DISABLE_NVLS=1).
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1
export NVSHMEM_REMOTE_TRANSPORT=${NVSHMEM_REMOTE_TRANSPORT:-none}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export CUCO_CACHE_DIR=${CUCO_CACHE_DIR:-/tmp/cuco-cache}

device_line() {
  echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)" \
       "x$(nvidia-smi -L | wc -l); date: $(date -u +%FT%TZ)"
}

# CUTLASS's headers (the compute libraries of moe, kv_transfer and attention_cp) come from the nvidia-cutlass wheel,
# carried in .whl/ (git-ignored: `mkdir -p .whl && pip download --no-deps -d .whl nvidia-cutlass==4.2.0.0` here,
# then `carry: [".whl"]`) and unpacked into /tmp/site unless the machine already has the package.
if ! python3 -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("cutlass_library") is None)'; then
  if ls .whl/nvidia_cutlass-*.whl >/dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps --no-compile \
       --no-cache-dir --upgrade --target /tmp/site .whl/nvidia_cutlass-*.whl; then
    export PYTHONPATH="$PYTHONPATH:/tmp/site"
  else
    echo "# no CUTLASS headers: carry .whl/ with the nvidia-cutlass wheel (see benchmarks/gpu_env.sh)" >&2
  fi
fi
