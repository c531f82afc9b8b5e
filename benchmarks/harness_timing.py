"""Does the harness time honestly? Compare its timing of NCCL's AllGather with an independent loop.

The independent loop is a small standalone CUDA program (below) that shares no code with the harness: one
process, one host thread driving every GPU (`ncclCommInitAll`, `ncclGroupStart/End`), the same memory setup
(symmetric `src` from ncclMemAlloc registered as a window, plain `dst`), and per iteration CUDA events around
the AllGather on every rank after all ranks synchronised. Its per-rank medians, max over ranks, are what the
harness's `max_median_ms` should agree with. It also reports back-to-back throughput (no sync between
iterations) for context.

    PYTHONPATH=src python3 benchmarks/harness_timing.py --out benchmarks/results/harness_timing.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from cuco.harness import HarnessRequest, build_shared, run_harness  # noqa: E402
from cuco.process import scrubbed_env  # noqa: E402
from cuco.toolchain import Toolchain, cache_dir, content_hash, default_toolchain  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "harness"

LOOP_SOURCE = r"""
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include <nccl.h>
#define CK(x) do { cudaError_t ck_e_ = (x); if (ck_e_ != cudaSuccess) { fprintf(stderr, "CUDA %s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(ck_e_)); exit(1); } } while (0)
#define NK(x) do { ncclResult_t nk_r_ = (x); if (nk_r_ != ncclSuccess) { fprintf(stderr, "NCCL %s:%d %s\n", __FILE__, __LINE__, ncclGetErrorString(nk_r_)); exit(1); } } while (0)

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char** argv) {
  if (argc != 5) { fprintf(stderr, "usage: loop WORLD BYTES_PER_RANK WARMUP ITERS\n"); return 2; }
  int world = atoi(argv[1]); size_t bytes = strtoull(argv[2], 0, 10); int warmup = atoi(argv[3]), iters = atoi(argv[4]);
  std::vector<int> devs(world); for (int r = 0; r < world; ++r) devs[r] = r;
  std::vector<ncclComm_t> comms(world); NK(ncclCommInitAll(comms.data(), world, devs.data()));
  std::vector<void*> src(world), dst(world); std::vector<ncclWindow_t> win(world);
  std::vector<cudaStream_t> st(world); std::vector<cudaEvent_t> e0(world), e1(world);
  for (int r = 0; r < world; ++r) {
    CK(cudaSetDevice(r)); NK(ncclMemAlloc(&src[r], bytes)); CK(cudaMalloc(&dst[r], bytes * world));
    CK(cudaMemset(src[r], r + 1, bytes)); CK(cudaMemset(dst[r], 0, bytes * world));
    CK(cudaStreamCreateWithFlags(&st[r], cudaStreamNonBlocking)); CK(cudaEventCreate(&e0[r])); CK(cudaEventCreate(&e1[r]));
  }
  NK(ncclGroupStart());
  for (int r = 0; r < world; ++r) { CK(cudaSetDevice(r)); NK(ncclCommWindowRegister(comms[r], src[r], bytes, &win[r], NCCL_WIN_COLL_SYMMETRIC)); }
  NK(ncclGroupEnd());
  std::vector<std::vector<double>> t(world);
  for (int it = 0; it < warmup + iters; ++it) {
    for (int r = 0; r < world; ++r) { CK(cudaSetDevice(r)); CK(cudaDeviceSynchronize()); }
    for (int r = 0; r < world; ++r) { CK(cudaSetDevice(r)); CK(cudaEventRecord(e0[r], st[r])); }
    NK(ncclGroupStart());
    for (int r = 0; r < world; ++r) NK(ncclAllGather(src[r], dst[r], bytes / 2, ncclBfloat16, comms[r], st[r]));
    NK(ncclGroupEnd());
    for (int r = 0; r < world; ++r) { CK(cudaSetDevice(r)); CK(cudaEventRecord(e1[r], st[r])); }
    for (int r = 0; r < world; ++r) {
      CK(cudaSetDevice(r)); CK(cudaEventSynchronize(e1[r])); float ms; CK(cudaEventElapsedTime(&ms, e0[r], e1[r]));
      if (it >= warmup) t[r].push_back(ms);
    }
  }
  // Back-to-back: iters AllGathers without host synchronisation between them.
  for (int r = 0; r < world; ++r) { CK(cudaSetDevice(r)); CK(cudaDeviceSynchronize()); CK(cudaEventRecord(e0[r], st[r])); }
  for (int it = 0; it < iters; ++it) {
    NK(ncclGroupStart());
    for (int r = 0; r < world; ++r) NK(ncclAllGather(src[r], dst[r], bytes / 2, ncclBfloat16, comms[r], st[r]));
    NK(ncclGroupEnd());
  }
  double b2b = 0;
  for (int r = 0; r < world; ++r) {
    CK(cudaSetDevice(r)); CK(cudaEventRecord(e1[r], st[r])); CK(cudaEventSynchronize(e1[r]));
    float ms; CK(cudaEventElapsedTime(&ms, e0[r], e1[r])); b2b = std::max(b2b, (double)ms / iters);
  }
  double worst = 0;
  printf("{\"per_rank_median_ms\": [");
  for (int r = 0; r < world; ++r) { double m = median(t[r]); worst = std::max(worst, m); printf("%s%.6f", r ? ", " : "", m); }
  printf("], \"max_median_ms\": %.6f, \"back_to_back_ms\": %.6f, \"iters\": %d, \"warmup\": %d}\n", worst, b2b, iters, warmup);
  for (int r = 0; r < world; ++r) { CK(cudaSetDevice(r)); NK(ncclCommWindowDeregister(comms[r], win[r])); NK(ncclMemFree(src[r])); CK(cudaFree(dst[r])); NK(ncclCommDestroy(comms[r])); }
  return 0;
}
"""


def loop_binary(toolchain: Toolchain | None = None) -> Path:
    """The independent AllGather timing program, compiled once per toolchain."""
    tc = toolchain or default_toolchain()
    out = cache_dir() / "bench" / content_hash(LOOP_SOURCE, tc.fingerprint()) / "allgather_loop"
    if out.exists():
        return out
    src = out.with_name("allgather_loop.cu")
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(LOOP_SOURCE)
    res = tc.compile([src], out, shared=False)
    if not res.ok:
        raise RuntimeError(f"building the independent AllGather loop failed:\n{res.log[-3000:]}")
    return out


def independent_allgather_ms(bytes_per_rank: int, world: int = 2, warmup: int = 5, iters: int = 30,
                             toolchain: Toolchain | None = None) -> dict:
    """Times ncclAllGather (bf16, `bytes_per_rank` per rank) with the standalone loop; returns its JSON."""
    proc = subprocess.run([str(loop_binary(toolchain)), str(world), str(bytes_per_rank), str(warmup), str(iters)],
                          capture_output=True, text=True, timeout=300, env=scrubbed_env())
    if proc.returncode != 0:
        raise RuntimeError(f"independent AllGather loop failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def harness_allgather(bytes_per_rank: int, world: int = 2, warmup: int = 5, iters: int = 30,
                      toolchain: Toolchain | None = None, with_lsa: bool = True):
    """Times the NCCL AllGather baseline (and the LSA pull) through the harness, with the parts."""
    plugin = build_shared(FIXTURES / "copy_workload.cu", ("cublasLt",), toolchain=toolchain)
    cands = [build_shared(FIXTURES / "nccl_allgather.cu", toolchain=toolchain)]
    if with_lsa:
        cands.append(build_shared(FIXTURES / "good_lsa.cu", toolchain=toolchain))
    req = HarnessRequest(plugin, cands, dims=(bytes_per_rank // 2,), world=world, seeds=(1,), warmup=warmup,
                         iters=iters, parts=True, timeout_s=120)
    return run_harness(req, toolchain)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=64, help="MiB per rank")
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "harness_timing.json")
    args = ap.parse_args()
    os.environ.update({"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"})
    nbytes = args.mib << 20
    start = time.time()
    res = harness_allgather(nbytes, args.world, args.warmup, args.iters)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_name(args.out.stem + "_harness_raw.json").write_text(res.to_json() + "\n")
    loop = independent_allgather_ms(nbytes, args.world, args.warmup, args.iters)
    nccl, lsa = res.candidates
    h_ms = nccl.time_ms
    report = {
        "what": f"ncclAllGather of {args.mib} MiB per rank (bf16), harness vs an independent standalone loop",
        "environment": res.environment(), "device": res.device, "world": res.world, "nccl_version": res.nccl_version,
        "cuda_runtime_version": res.cuda_runtime_version, "driver": res.driver_release or res.driver_version,
        "date": res.date, "hostname": res.hostname,
        "harness": {"nccl_allgather": {"status": nccl.status, "max_median_ms": h_ms,
                                       "per_rank_median_ms": list(nccl.timing.per_rank_median_ms) if nccl.timing else None,
                                       "spread": nccl.timing.spread if nccl.timing else None},
                    "good_lsa": {"status": lsa.status, "max_median_ms": lsa.time_ms,
                                 "spread": lsa.timing.spread if lsa.timing else None},
                    "parts": {k: p.timing.max_median_ms if p.timing else None for k, p in res.parts.items()}},
        "independent_loop": loop,
        "relative_difference": (h_ms - loop["max_median_ms"]) / loop["max_median_ms"] if h_ms else None,
        "bus_bandwidth_GBps": {"harness_nccl": nbytes * (args.world - 1) / (h_ms * 1e-3) / 1e9 if h_ms else None,
                               "harness_lsa": nbytes * (args.world - 1) / (lsa.time_ms * 1e-3) / 1e9
                               if lsa.time_ms else None},
        "seconds": time.time() - start,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1) + "\n")
    os.replace(tmp, args.out)
    print(json.dumps(report, indent=1))
    ok = nccl.ok and report["relative_difference"] is not None and abs(report["relative_difference"]) <= 0.05
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
