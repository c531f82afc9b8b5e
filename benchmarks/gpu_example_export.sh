#!/usr/bin/env bash
# examples/torch_module_export.py on one GPU: a search, then the layer's forward pass through the exported op.
set -u
source benchmarks/gpu_env.sh
out=$1
mkdir -p "$out"
{ device_line; python3 examples/torch_module_export.py /tmp/cuco-example-run --search 2>&1 | grep -v Warning | tail -20; \
  echo "exit status: ${PIPESTATUS[0]}"; } > "$out/torch_module_export.log"
