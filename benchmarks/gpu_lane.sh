#!/usr/bin/env bash
# A lane of benchmarks/gpu_w.sh parts on some GPUs of the machine, within a deadline, so one device command can run
# two W = 2 lanes side by side on disjoint GPU pairs and still end in time:
#
#   bash benchmarks/gpu_lane.sh DEADLINE_S GPUS W:PART[:CAP_S] ...      e.g.  540 0,1 2:graph-moe 2:bench-moe:200
#
# Each part runs on CUDA_VISIBLE_DEVICES=GPUS with its timeouts cut to the time left before DEADLINE_S (seconds
# from the lane's start), and to CAP_S where given; a part that would start with under 45 s left is skipped and
# said so. A bench part's shapes: SHAPES_<workload>, else the issue's list (benchmarks/gpu_w.sh). The figures of record
# of two lanes never overlap (benchmarks/record.py holds a host-wide lock while it re-times).
set -uo pipefail
DEADLINE=${1:?usage: gpu_lane.sh DEADLINE_S GPUS W:PART ...}
GPUS=${2:?usage: gpu_lane.sh DEADLINE_S GPUS W:PART ...}
shift 2
cd "$(dirname "$0")/.."
export CUDA_VISIBLE_DEVICES=$GPUS
for item in "$@"; do
  W=${item%%:*} rest=${item#*:}
  PART=${rest%%:*} cap=${rest#"$PART"}
  cap=${cap#:}
  left=$((DEADLINE - SECONDS))
  [ -n "$cap" ] && [ "$cap" -lt "$left" ] && left=$cap
  if [ "$left" -lt 45 ]; then echo "lane $GPUS: skipped $item ($left s left)"; continue; fi
  echo "lane $GPUS: $item with $left s left"
  export TEST_TIMEOUT=$((left - 10)) SAN_TIMEOUT=$((left - 10)) GRAPH_TIMEOUT=$((left - 10))
  export RED_TIMEOUT=$((left - 10)) OWN_TIMEOUT=$((left - 10))
  # the torch anchor's share: a quarter of the part, a half for KV transfer (its layer stacks took more than 79 s of
  # a 318 s part for the first shape's round)
  share=4; [ "$PART" = bench-kv_transfer ] && share=2
  export TORCH_TIMEOUT=$(( left / share < 240 ? left / share : 240 ))
  export BENCH_TIMEOUT=$((left - TORCH_TIMEOUT - 15))
  bash benchmarks/gpu_w.sh "$W" "$PART" "${LANE_OUT:-benchmarks/results/w$W}"
done
echo "lane $GPUS: done after $SECONDS s"
