#!/usr/bin/env bash
# Users' own programs on one GPU (W = 1): the program-harness GPU tests, then `cuco run prog.cu` on corpus
# programs (offline search). Usage: benchmarks/gpu_own_programs.sh OUT_DIR "prog1,prog2,..." EVALS [tests]
set -u
source benchmarks/gpu_env.sh
out=$1; programs=$2; evals=${3:-6}; tests=${4:-}
mkdir -p "$out"
{ device_line; python3 -c "import nccl, sys; print('# python', sys.version.split()[0])" 2>/dev/null; } > "$out/own_programs.log"
if [ -n "$tests" ]; then
  python3 -m pytest -m gpu tests/test_program_gpu.py -q -p no:cacheprovider 2>&1 | tail -30 > "$out/program_gpu_tests.log"
  { device_line; cat "$out/program_gpu_tests.log"; } > "$out/tmp.log" && mv "$out/tmp.log" "$out/program_gpu_tests.log"
fi
python3 benchmarks/own_programs.py --programs "$programs" --world 1 --evals "$evals" --runs-dir /tmp/own \
  --out "$out/rows.json" >> "$out/own_programs.log" 2>&1
