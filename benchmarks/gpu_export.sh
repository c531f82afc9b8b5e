#!/usr/bin/env bash
# The exported op and the program harness on one GPU: their GPU tests, then benchmarks/export_w1.py.
# Usage: benchmarks/gpu_export.sh OUT_DIR [SHAPE]
set -u
source benchmarks/gpu_env.sh
out=$1; shape=${2:-8192,8192,8192}
mkdir -p "$out"
{ device_line; python3 -m pytest -m gpu ${TESTS:-tests/test_export_gpu.py tests/test_program_gpu.py} -q -p no:cacheprovider 2>&1 | tail -25; } \
  > "$out/export_program_gpu_tests.log"
{ device_line; python3 benchmarks/export_w1.py --shape "$shape" --evals 4 --out "$out/export_w1.json" 2>&1 | tail -60; } \
  > "$out/export_w1.log"
