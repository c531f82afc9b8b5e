#!/usr/bin/env bash
# Builds and runs the NVSHMEM probe with the nvidia-nvshmem wheel of this machine's Python.
set -uo pipefail
cd "$(dirname "$0")"
NV=$(python3 -c "import nvidia.nvshmem, os; print(nvidia.nvshmem.__path__[0])")
echo "nvshmem at $NV: $(ls $NV/lib | tr '\n' ' ')"
python3 -m pip list 2>/dev/null | grep -i nvshmem
B=${1:-/tmp/nvshmem_probe}; mkdir -p $B
export NVSHMEM_DISABLE_NVLS=1 NVSHMEM_SYMMETRIC_SIZE=268435456 NCCL_NVLS_ENABLE=0
nvcc -std=c++17 -arch=sm_90 -rdc=true -Xcompiler -fPIC -shared cand.cu -I$NV/include -L$NV/lib \
  -lnvshmem_device -l:libnvshmem_host.so.3 -Xlinker -rpath,$NV/lib -o $B/cand.so || exit 1
nvcc -std=c++17 -arch=sm_90 host.cpp -I$NV/include -L$NV/lib -l:libnvshmem_host.so.3 -ldl \
  -Xlinker -rpath,$NV/lib -o $B/host || exit 1
for mode in check_state init_attr none; do
  echo "== mode $mode"; timeout 60 $B/host $B/cand.so $mode 2>&1 | tail -12; echo "exit $?"
done
