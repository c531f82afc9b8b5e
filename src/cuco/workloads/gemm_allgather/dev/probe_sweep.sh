#!/bin/bash
# Sweep the probe's knobs on the GPU machine (diagnostics for the dev notes). Usage: probe_sweep.sh BUILD_DIR
set -u
B=$1; mkdir -p $B
PYTHONPATH=src python3 -m cuco.workloads.gemm_allgather.dev.probe lsa/stream_overlap/block/warp/whole $B/probe.cu
PYTHONPATH=src python3 -c "
import sys; from pathlib import Path
from cuco.toolchain import Toolchain, csrc_dir
tc = Toolchain.detect(); inc=[csrc_dir()/'include']
from cuco.workloads.gemm_allgather.dev.devrun import HERE, FOLDER
for src, dst, sh, ex in [(HERE/'driver.cu', Path('$B/driver'), False, ('-ldl','-lpthread')), (FOLDER/'plugin.cu', Path('$B/plugin.so'), True, ()), (Path('$B/probe.cu'), Path('$B/probe.so'), True, ())]:
    r = tc.compile([src], dst, shared=sh, include_dirs=inc, libraries=('cublasLt',), extra=ex); print(dst, r.ok, r.log[-2000:])
"
D="--dims 8192,8192,8192 --dims 16384,8192,3584 --dims 4096,4096,4096"
run() { echo "== $*"; env "$@" $B/driver --workload $B/plugin.so --candidate $B/probe.so $D --seeds 1 --bench 30 --warmup 5 --parts 0 --force-bench 1 | grep -o '"dims": "[^"]*".*"min_ms": [0-9.]*'; }
run AG_SKIP=1 AG_FULL=1
run AG_SKIP=1 AG_NCOMM=4
run AG_SKIP=1 AG_NCOMM=8
for n in 2 4 8 16; do run AG_NCOMM=$n; done
run AG_NCOMM=4 AG_FULL=1
run AG_NCOMM=8 AG_FULL=1
