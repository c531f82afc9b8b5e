#!/usr/bin/env bash
# The new design points of users' programs on one GPU (W = 1), in one device call of under ten minutes: the GPU
# tests of the copy-engine and signal paths (tests/test_program_points_gpu.py), then `cuco run prog.cu` (offline
# search, fast path first, so the conservative point is verified too) on the corpus programs whose space grew:
# those calling AllGather, AlltoAll or Broadcast. rows.json is written after each program; the markdown last.
# Usage: benchmarks/gpu_program_points.sh OUT_DIR [PROGRAMS] [EVALS]
set -u
source benchmarks/gpu_env.sh
out=$1; programs=${2:-sp_mlp_ag_rs,moe_alltoall_pool,bcast_weights_async}; evals=${3:-8}
mkdir -p "$out"
{ device_line; timeout 240 python3 -m pytest -m gpu tests/test_program_points_gpu.py -q -p no:cacheprovider 2>&1 \
    | tail -40; } > "$out/program_points_gpu_tests.log"
device_line > "$out/own_programs.log"
python3 benchmarks/own_programs.py --programs "$programs" --world 1 --evals "$evals" --runs-dir /tmp/own-points \
  --out "$out/rows.json" >> "$out/own_programs.log" 2>&1
python3 benchmarks/own_programs.py --render "$out/rows.json" --md "$out/own_programs_points_w1.md" > /dev/null
