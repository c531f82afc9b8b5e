#!/usr/bin/env bash
# One resumable part of the multi-GPU runs behind benchmarks/results/, each sized to fit one command on the GPU
# machine (<= 9 minutes); parts can run in any order, and each writes its own log:
#
#   bash benchmarks/gpu_w.sh W PART [OUT_DIR]
#
# PART: suite (every GPU test file at world W, one tests-<name> part each, resumable; then
# benchmarks/results/gpu_tests_w<W>.log, benchmarks/suite_log.py) | env (device, versions, `nvidia-smi topo -m`,
# measured peer-to-peer GB/s, alone: OUT_DIR/machine.json, which
# later parts' results files record) | bench-<workload> (its torch anchor, then its benchmark, back to back, shapes
# from SHAPES_<workload>, else those of the issue's list its results file still needs (`all`: every one); results
# merged by shape into benchmarks/results/<workload>_w<W>.*, logs appended) | build (every workload's compute
# library, in parallel) | tests-<workload> (its GPU tests at world W; tests-NAME: tests/test_NAME_gpu.py) |
# sanitize-<workload> (compute-sanitizer memcheck and synccheck over its fast path and best point,
# benchmarks/sanitize.py) | graph-<workload> (CUDA-graph capture of one delayed launch of its fast path, best points
# and seed, replayed 20 times with fresh inputs and checked each time, benchmarks/graph_replay.py) | trace-<workload>
# (POINTS at SHAPE traced under CUPTI beside the host seed: per rank and launch, compute, communication, their overlap
# and the kernels by time, benchmarks/trace_points.py, into OUT_DIR/trace_<workload>_w<W>/) | reductions
# (device-initiated AllReduce, ReduceScatter
# and Reduce against NCCL's, 1 MiB to 1 GiB, benchmarks/reductions_vs_nccl.py) | gemm-under-copy (a GEMM's
# slowdown while copy engines pull the other ranks' rows, and the split GEMM waiting on them, with SM clocks and power,
# benchmarks/gemm_under_copy.py) |
# fmha-variants (the FMHA's tile and schedule against other configurations and torch SDPA, W = 1, one GPU,
# benchmarks/fmha_variants.py; build its binaries here first) | moe-split-cost (MoE's FFN cut by source, six ways, one
# GPU, benchmarks/moe_split_cost.py) | moe-gather-variants (MoE's fused points with kGatherUnroll, kRowBatch and
# kCommCtas replaced, whole and dispatch alone, one GPU, benchmarks/moe_gather_variants.py) | kv-gemm-sms (KV
# transfer's beside points with the layer's GEMMs on every SM or on the SMs their transfer kernels leave, at W,
# SHAPE=S,KV,L, benchmarks/kv_gemm_sms.py) | attention-gather
# (ring attention's compute at W ranks, the ring's steps against one call per zigzag chunk over K/V gathered in
# global order, one GPU, benchmarks/attention_gather_compute.py) |
# gemm-waves (GEMM+AllGather's persistent GEMM on the SMs the fused point's pulls leave, against its waves, one GPU,
# benchmarks/gemm_waves.py) |
# merge-accuracy (ring attention's max |O - O_fp32| / max |O_fp32| at W = 1, 2 and W on one global problem,
# benchmarks/attention_merge_accuracy.py) | module-loading (PROGRAM's, default tp_mlp_cublas, process wall time and
# region times under EAGER and LAZY module loading, alternately, benchmarks/module_loading.py) | own-programs (`cuco run
# prog.cu` on
# the corpus programs that benchmarks/results/own_programs_w<W>.json has no row for, or PROGRAMS, rows into
# OUT_DIR/own_programs_rows_w<W>.json as each ends) | cache-save / cache-load (the compile cache's CACHE_PARTS, default
# `compute` (the compute libraries, about 2 minutes to build on a fresh machine), as OUT_DIR/cache.tgz; or from
# .devcache/cache.tgz carried in, which gpu_env.sh already does wherever the cache holds no compute libraries:
# keyed by sources, toolchain and paths, so a stale entry is never used) ;
# workload: gemm_allgather moe kv_transfer attention_cp.
# Environment: TEST_TIMEOUT (seconds, default 520), SAN_TIMEOUT (280), GRAPH_TIMEOUT (400), MAX_SHAPES (a bench part's
# shapes at most), SHARD (i/n: own-programs runs every n-th pending program, one shard per lane), CUCO_FIRST_POINTS
# (labels every search evaluates right after the fast path, `cuco run --try`), RED_CTAS (reductions: CTA counts of
# the rewrite's communication kernels, e.g. 32,64,128, one column each; default 32), RED_TIMEOUT (reductions' whole
# part, seconds, default 400). NVLink multicast stays off (benchmarks/gpu_env.sh).
set -uo pipefail
W=${1:?usage: bash benchmarks/gpu_w.sh W PART [OUT_DIR]}
PART=${2:?usage: bash benchmarks/gpu_w.sh W PART [OUT_DIR]}
cd "$(dirname "$0")/.."
OUT_DIR=${3:-benchmarks/results/w$W}
source benchmarks/gpu_env.sh
mkdir -p "$OUT_DIR"
KEEP=${KEEP_DIR:-/tmp/cuco-kept-logs/$(cd "$OUT_DIR" && pwd | tr / _)}   # logs kept across device calls

header() {
  device_line
  python3 - <<'PY' 2>/dev/null
import glob, os, nvidia.nccl, torch
print("# nccl wheel:", [os.path.basename(p) for p in glob.glob(os.path.dirname(nvidia.nccl.__file__) + "/../nvidia_nccl*dist-info")],
      "torch", torch.__version__, "cuda", torch.version.cuda)
PY
  echo "# $(nvcc --version | tail -1)"
  # the GPU machine's copy of the tree may carry an older .git: the caller names the commit it sent (CUCO_COMMIT)
  echo "# commit ${CUCO_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo '+local changes')}"
}

# One GPU probe script under the part's timeout (RED_TIMEOUT), its log OUT_DIR/NAME.log headed by the device line.
probe() {
  local name=$1
  shift
  { header; timeout "${RED_TIMEOUT:-400}" python3 "$@"; echo "$name: exit $?"; } 2>&1 | tee "$OUT_DIR/$name.log"
}

case $PART in
  env)
    { header; nvidia-smi topo -m; python3 benchmarks/p2p_bandwidth.py --world "$W" --json "$OUT_DIR/p2p_w$W.json"
      python3 -c "import json, sys; sys.path.insert(0, 'benchmarks'); from record import machine; \
json.dump(machine($W), open('$OUT_DIR/machine.json', 'w'), indent=1)"
    } 2>&1 | tee "$OUT_DIR/env_w$W.log" ;;
  bench-*)
    wl=${PART#bench-}
    [ -f "$OUT_DIR/machine.json" ] && export CUCO_P2P_JSON="$(cd "$OUT_DIR" && pwd)/machine.json"
    own="SHAPES_$wl"
    SHAPES=${!own:-}
    given=$SHAPES; [ "$SHAPES" = all ] || [ "$SHAPES" = pending ] && SHAPES=
    case $wl in
      attention_cp) anchor=torch_ring_attention.py field=torch_ring_ms
        shapes=${SHAPES:-s4096-d32,s8192-d64,s8192-d32,s4096-d64,llama3-8b,llama3-8b-full} ;;
      moe) anchor=torch_moe_layer.py field=torch_layer_ms
        if [ "$W" = 4 ]; then d=paper4; else d=paper; fi
        shapes=${SHAPES:-$d-r1,$d-r2,$d-r3,$d-r4,$d-r5,dsv3-r3} ;;
      kv_transfer) anchor=torch_kv_transfer.py field=torch_kv_ms
        shapes=${SHAPES:-s2048-kv512,s2048-kv768,s2048-kv1024,s3072-kv512,s3072-kv768,s3072-kv1024,s4096-kv512,s4096-kv768,s4096-kv1024,long,s256-kv1024} ;;
      gemm_allgather) anchor=torch_anchor.py field=torch_fused_ms
        shapes=${SHAPES:-8192,8192,8192;16384,8192,3584;4096,4096,4096;32768,8192,8192;12288,5120,5120;2048,8192,28672;8192,4096,28672;4096,7168,18432} ;;
      *) echo "unknown workload $wl" >&2; exit 2 ;;
    esac
    # by default only the shapes the results file still needs (resumable over calls); SHAPES_<workload>=all: every one
    if [ -z "$given" ] || [ "$given" = pending ]; then
      shapes=$(python3 benchmarks/results_rows.py pending "benchmarks/results/${wl}_w$W.json" "$W" "$shapes" "$field")
      [ -n "$shapes" ] || { echo "# bench-$wl at W = $W: every shape has a verified row; SHAPES_$wl=all re-runs" \
        | tee -a "$OUT_DIR/bench_${wl}_w$W.log"; exit 0; }
    fi
    # MAX_SHAPES=N: the first N only, so that the anchor's repeats and the benchmark both finish inside the part
    if [ -n "${MAX_SHAPES:-}" ]; then
      sep=,; case $shapes in *\;*) sep=';' ;; esac
      shapes=$(echo "$shapes" | tr "$sep" '\n' | head -n "$MAX_SHAPES" | paste -sd "$sep")
    fi
    { header
      echo "# shapes: $shapes; CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-all}"
      # torch first, then cuco, in the same call: one machine, back to back; this call's anchors alone feed its
      # rows, then fold into the folder's torch_<workload>_w<W>.json by shape
      call="$OUT_DIR/torch_${wl}_w$W.call.json"
      rm -f "$call"
      timeout "${TORCH_TIMEOUT:-240}" python3 -m torch.distributed.run --standalone --nproc_per_node "$W" \
        "benchmarks/$anchor" "$call" --shapes "$shapes"
      echo "torch anchor: exit $?"
      extra=()
      [ -f "$call" ] && extra=(--torch-json "$call")
      [ "$wl" = kv_transfer ] && extra+=(--rank-layers "${RANK_LAYERS:-4}" --record-iters "${RECORD_ITERS:-10}" --long-iters 5)
      [ "$wl" = moe ] && extra+=(--sweep '')
      timeout "${BENCH_TIMEOUT:-480}" python3 "benchmarks/$wl.py" --world "$W" --shapes "$shapes" \
        --evals "${EVALS:-8}" --out benchmarks/results "${extra[@]}"
      echo "bench: exit $?"
      [ -f "$call" ] && python3 benchmarks/results_rows.py fold "$OUT_DIR/torch_${wl}_w$W.json" "$call" && rm -f "$call"
    } 2>&1 | tee -a "$OUT_DIR/bench_${wl}_w$W.log" ;;
  build)
    { header
      for wl in gemm_allgather moe kv_transfer attention_cp; do
        python3 -c "import sys; from cuco import workloads; from cuco.kit.compute import build_compute; \
from cuco.toolchain import default_toolchain; wl = workloads.get('$wl'); \
b = build_compute(wl, default_toolchain()) if wl.compute else None; print('$wl', b and round(b.seconds, 1))" &
      done
      wait; } 2>&1 | tee "$OUT_DIR/build_w$W.log" ;;
  tests-*)
    wl=${PART#tests-}
    # a workload's GPU tests, or tests/test_<name>_gpu.py (tests-fastpath, tests-program, tests-program_points)
    file=tests/test_workload_${wl}_gpu.py
    [ -f "$file" ] || file=tests/test_${wl}_gpu.py
    # a failed run at this commit is kept beside the log before a re-run replaces it (suite_log.py names it)
    log="$OUT_DIR/gpu_tests_${wl}_w$W.log"
    if [ -f "$log" ] && grep -qx "# commit ${CUCO_COMMIT:-none}" "$log" && ! grep -qx "gpu tests: exit 0" "$log"; then
      n=1; while [ -e "$OUT_DIR/gpu_tests_${wl}_w$W.failed-$n.log" ]; do n=$((n + 1)); done
      mkdir -p "$KEEP" && cp "$log" "$OUT_DIR/gpu_tests_${wl}_w$W.failed-$n.log" && cp "$log" "$KEEP/${log##*/}.failed-$n"
    fi
    { header
      timeout "${TEST_TIMEOUT:-520}" python3 -m pytest -m gpu "$file" --world "$W" -v \
        -p no:cacheprovider --durations=10
      echo "gpu tests: exit $?"; } 2>&1 | tee "$OUT_DIR/gpu_tests_${wl}_w$W.log"
    # kept outside the tree too: the next device call's copy of the tree replaces OUT_DIR, and `suite` takes back
    # the logs of its commit from here
    mkdir -p "$KEEP" && cp "$OUT_DIR/gpu_tests_${wl}_w$W.log" "$KEEP/" ;;
  suite)
    # every GPU test file at world W, one tests-<name> part each, in turn; a file whose log already shows this
    # commit passing is not run again (resumable over device calls on one machine: the logs of CUCO_COMMIT kept
    # outside the tree come back first, since each call's copy of the tree replaces OUT_DIR); a file is not started
    # with less left of SUITE_S (default 540) than its last logged run took and a fifth (60 s at least); then
    # benchmarks/results/gpu_tests_w<W>.log gathers the files' summaries. Suites of two world sizes may run at once
    # (their logs and lists of pending files are apart);
    # LANES (e.g. "0,1 2,3") shares the files out over GPU sets, each running its share in turn
    start=$SECONDS
    for kept in "$KEEP"/gpu_tests_*_w"$W".log; do
      [ -f "$kept" ] && grep -qx "# commit ${CUCO_COMMIT:-none}" "$kept" && cp "$kept" "$OUT_DIR/"
    done
    for kept in "$KEEP"/gpu_tests_*_w"$W".log.failed-*; do   # the failed runs before them too
      [ -f "$kept" ] && grep -qx "# commit ${CUCO_COMMIT:-none}" "$kept" \
        && cp "$kept" "$OUT_DIR/$(basename "${kept%.log.failed-*}").failed-${kept##*.failed-}.log"
    done
    pending=$(mktemp /tmp/suite_todo.XXXX)
    # SUITE_TODO: that list made where git knows the history (the GPU machine's copy may carry none)
    if [ -n "${SUITE_TODO:-}" ]; then cp "$SUITE_TODO" "$pending"
    else python3 benchmarks/suite_log.py "$W" "$OUT_DIR" --todo "${CUCO_COMMIT:-}" > "$pending"; fi
    run_files() {   # the pending files of lines $1 (every $2-th from the first) on the visible GPUs
      awk -v i="$1" -v n="$2" '(NR - 1) % n == i' "$pending" | while read -r f name; do
        log="$OUT_DIR/gpu_tests_${name}_w$W.log"
        left=$(( ${SUITE_S:-540} - (SECONDS - start) ))
        # a file is started only with its last run's time and a fifth more left (60 s where no log says): one
        # cut off by the part's limit spends the time and proves nothing; a shorter file further down may still fit
        last=$(grep -E '^=+ .* in [0-9.]+s' "$log" 2>/dev/null | tail -1 | sed -E 's/.* in ([0-9]+)[0-9.]*s.*/\1/')
        need=$(( ${last:-0} + ${last:-0} / 5 + 10 )); [ "$need" -lt 60 ] && need=60
        if [ "$left" -lt "$need" ]; then
          echo "suite: $f not started (needs about $need s,${last:+ its last run took $last s,} $left s left)"
          continue
        fi
        TEST_TIMEOUT=$(( left - 10 < ${TEST_TIMEOUT:-520} ? left - 10 : ${TEST_TIMEOUT:-520} )) \
          bash benchmarks/gpu_w.sh "$W" "tests-$name" "$OUT_DIR" < /dev/null > /dev/null
        gpus=${CUDA_VISIBLE_DEVICES:+ (GPUs $CUDA_VISIBLE_DEVICES)}
        echo "suite: $f$gpus: $(grep -E '^=+ .* in [0-9.]+s' "$log" | tail -1)"
      done
    }
    # LANES="0,1 2,3": the files shared out over GPU sets that run side by side (W = 2 on a 4-GPU machine)
    read -r -a lanes <<< "${LANES:-}"
    if [ "${#lanes[@]}" -gt 1 ]; then
      for i in "${!lanes[@]}"; do (export CUDA_VISIBLE_DEVICES=${lanes[$i]}; run_files "$i" "${#lanes[@]}") & done
      wait
    else
      run_files 0 1
    fi
    rm -f "$pending"
    # the committed summary only from the committed folder's logs (a scratch OUT_DIR keeps its own)
    summary=benchmarks/results/gpu_tests_w$W.log
    [ "$OUT_DIR" = "benchmarks/results/w$W" ] || summary=$OUT_DIR/gpu_tests_w$W.log
    python3 benchmarks/suite_log.py "$W" "$OUT_DIR" "$summary" ;;
  sanitize-*)
    wl=${PART#sanitize-}
    { header
      timeout "${SAN_TIMEOUT:-280}" python3 benchmarks/sanitize.py --workload "$wl" --world "$W" --timeout-s 100 \
        --out "$OUT_DIR/sanitize_${wl}_w$W"
      echo "sanitize: exit $?"; } 2>&1 | tee "$OUT_DIR/sanitize_${wl}_w$W.log" ;;
  graph-*)
    wl=${PART#graph-}
    { header
      timeout "${GRAPH_TIMEOUT:-400}" python3 benchmarks/graph_replay.py --workload "$wl" --world "$W" --replays 20 \
        --timeout-s 100 --out "$OUT_DIR/graph_${wl}_w$W.json"
      echo "graph replay: exit $?"; } 2>&1 | tee "$OUT_DIR/graph_${wl}_w$W.log" ;;
  trace-*)
    wl=${PART#trace-}
    probe "trace_${wl}_w$W" benchmarks/trace_points.py --workload "$wl" --world "$W" --shape "${SHAPE:?SHAPE=<shape>}" \
      --points "${POINTS:?POINTS=<labels>}" --out "$OUT_DIR/trace_${wl}_w$W" ;;
  gemm-under-copy)
    probe gemm_under_copy_w$W benchmarks/gemm_under_copy.py --world "$W" --json "$OUT_DIR/gemm_under_copy_w$W.json" ;;
  fmha-variants)
    # W = 1 work on one GPU (CUDA_VISIBLE_DEVICES picks it): the binaries come built from .devcache/fmha_variants
    probe fmha_variants benchmarks/fmha_variants.py run --json "$OUT_DIR/fmha_variants.json" \
      --md "$OUT_DIR/fmha_variants.md" ;;
  moe-split-cost)
    # W = 1 work on one GPU: MoE's FFN of the busiest rank cut by source, timed six ways (benchmarks/moe_split_cost.py)
    probe moe_split_cost benchmarks/moe_split_cost.py --out "$OUT_DIR/moe_split_cost.json" ;;
  moe-gather-variants)
    # W = 1 work on one GPU: MoE's fused points with their row-copy constants replaced, whole and dispatch alone
    probe moe_gather_variants benchmarks/moe_gather_variants.py --json "$OUT_DIR/moe_gather_variants.json" ;;
  kv-gemm-sms)
    # KV transfer's beside points with the layer's GEMMs on every SM or on those left spare (W = 1 or a pair)
    # (TRANSFER_ALONE=1: each point's transfer path alone, its GB/s)
    name="kv_gemm_sms_w${W}_$(echo "${SHAPE:-2048,512,4}" | tr , x)${TRANSFER_ALONE:+_transfer}"
    probe "$name" benchmarks/kv_gemm_sms.py --world "$W" --shape "${SHAPE:-2048,512,4}" --json "$OUT_DIR/$name.json" \
      ${TRANSFER_ALONE:+--transfer-alone} ${POINTS:+--points "$POINTS"} ;;
  gemm-waves)
    # W = 1 work on one GPU: GEMM+AllGather's persistent GEMM on the SMs the fused point's pulls leave, by waves
    probe gemm_waves benchmarks/gemm_waves.py --json "$OUT_DIR/gemm_waves.json" ;;
  attention-gather)
    # W = 1 work on one GPU: ring attention's compute at W ranks, ring steps against the gathered form
    probe attention_gather_compute benchmarks/attention_gather_compute.py \
      --json "$OUT_DIR/attention_gather_compute.json" ;;
  merge-accuracy)
    probe attention_merge_accuracy benchmarks/attention_merge_accuracy.py --worlds "${WORLDS:-1,2,$W}" \
      --json "$OUT_DIR/attention_merge_accuracy.json" --md "$OUT_DIR/attention_merge_accuracy.md" ;;
  module-loading)
    probe module_loading_w$W benchmarks/module_loading.py --program "${PROGRAM:-tp_mlp_cublas}" --world "$W" \
      --runs "${RUNS:-4}" --json "$OUT_DIR/module_loading_w$W.json" ;;
  reductions)
    # RED_CTAS=32,64,128: the rewrite at each of these CTA counts per communication kernel, each its own column
    probe reductions_w$W benchmarks/reductions_vs_nccl.py --world "$W" --out "$OUT_DIR/reductions_w$W.json" \
      ${RED_CTAS:+--ctas "$RED_CTAS"} ;;
  own-programs)
    { header
      timeout "${OWN_TIMEOUT:-500}" python3 benchmarks/own_programs.py --programs "${PROGRAMS:-pending}" \
        --done "benchmarks/results/own_programs_w$W.json" --shard "${SHARD:-0/1}" --world "$W" --evals "${EVALS:-8}" \
        --runs-dir "$(mktemp -d /tmp/own-runs.XXXX)" \
        --out "$OUT_DIR/own_programs_rows_w$W.json"
      echo "own programs: exit $?"; } 2>&1 | tee "$OUT_DIR/own_programs_w$W.log" ;;
  cache-save)
    tar czf "$OUT_DIR/cache.tgz" -C "$CUCO_CACHE_DIR" --exclude='*.lock' ${CACHE_PARTS:-compute} \
      && ls -la "$OUT_DIR/cache.tgz" ;;
  cache-load)
    unpack_cache ;;
  *) echo "unknown part $PART (suite, env, bench-<workload>, build, tests-<workload>, sanitize-<workload>," \
       "graph-<workload>, trace-<workload>, reductions, gemm-under-copy, merge-accuracy, own-programs," \
       "cache-save, cache-load)" >&2; exit 2 ;;
esac
