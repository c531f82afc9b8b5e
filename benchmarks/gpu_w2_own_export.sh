#!/usr/bin/env bash
# Two GPUs: `cuco run prog.cu --world 2` on corpus programs, then the exported op in a 2-process torch job.
# Usage: benchmarks/gpu_w2_own_export.sh OUT_DIR "prog1,prog2" EVALS
set -u
source benchmarks/gpu_env.sh
out=$1; programs=$2; evals=${3:-4}
mkdir -p "$out"
{ device_line; python3 benchmarks/own_programs.py --programs "$programs" --world 2 --evals "$evals" --runs-dir /tmp/own2 \
  --out "$out/rows_w2.json" 2>&1 | cut -c1-400; } > "$out/own_programs_w2.log"
{ device_line; python3 -m cuco.cli run gemm_allgather --world 2 --shape 4096,4096,4096 --evals 2 --run-dir /tmp/ag2 --quiet 2>&1 | tail -12;
  python3 -m torch.distributed.run --nproc-per-node 2 examples/torch_module_export.py /tmp/ag2 2>&1 | grep -v Warning | tail -12; echo "exit status: ${PIPESTATUS[0]}"; } \
  > "$out/torch_module_export_w2.log"
