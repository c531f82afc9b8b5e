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
