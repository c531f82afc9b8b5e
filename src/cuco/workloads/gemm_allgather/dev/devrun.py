"""Build and run GEMM+AllGather candidates with the standalone driver (dev/driver.cu), for GPU tests and
measurements before the cuco harness is available.

    PYTHONPATH=src python3 -m cuco.workloads.gemm_allgather.dev.devrun --build build/ag --verify all-lsa \
        --bench 'lsa/stream_overlap/signal/warp/whole' --bench-dims 8192,8192,8192
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable, Sequence

from cuco.design_space import Directives, Topology
from cuco.toolchain import Toolchain, csrc_dir

HERE = Path(__file__).resolve().parent
FOLDER = HERE.parent


def _workload():
    from cuco.workloads.gemm_allgather import WORKLOAD

    return WORKLOAD


def so_name(label: str) -> str:
    return label.replace("/", ".") + ".so"


def build(labels: Sequence[str], out: Path, tc: Toolchain, jobs: int = 2, core: bool = True,
          log=print) -> dict[str, Path]:
    """Compile the driver, plugin, seed (core=True) and each labelled point into `out`; returns name -> path of
    what compiled. Failures are logged with the compiler output."""
    out.mkdir(parents=True, exist_ok=True)
    inc = [csrc_dir() / "include"]
    wl = _workload()
    tasks: list[tuple[str, list[Path], Path, bool, tuple[str, ...]]] = []
    if core:
        tasks.append(("driver", [HERE / "driver.cu"], out / "driver", False, ("-ldl", "-lpthread")))
        tasks.append(("plugin", [FOLDER / "plugin.cu"], out / "plugin.so", True, ()))
        tasks.append(("seed", [FOLDER / "seed_host.cu"], out / "seed_host.so", True, ()))
    for label in labels:
        src = out / (so_name(label)[:-3] + ".cu")
        text = wl.render(Directives.from_label(label))
        tmp = src.with_suffix(".cu.tmp")
        tmp.write_text(text)
        os.replace(tmp, src)
        tasks.append((label, [src], out / so_name(label), True, ()))

    def one(task):
        name, srcs, dst, shared, extra = task
        r = tc.compile(srcs, dst, shared=shared, include_dirs=inc, libraries=("cublasLt",), extra=extra)
        return name, r

    built: dict[str, Path] = {}
    with cf.ThreadPoolExecutor(max_workers=jobs) as pool:
        for name, r in pool.map(one, tasks):
            if r.ok:
                built[name] = r.output
            else:
                log(f"COMPILE FAIL {name} ({r.seconds:.1f}s)\n{r.log[-4000:]}")
    return built


def run_driver(driver: Path, plugin: Path, candidates: Iterable[Path], dims: Iterable[str], *, world: int = 2,
               seeds: str = "1,2", bench: int = 0, warmup: int = 3, parts: int = 0,
               timeout: float = 600) -> list[dict]:
    """Run the driver; returns its RESULT records (a hang or crash adds an 'error' record)."""
    cmd = [str(driver), "--workload", str(plugin), "--world", str(world), "--seeds", seeds, "--bench", str(bench),
           "--warmup", str(warmup), "--parts", str(parts)]
    for c in candidates:
        cmd += ["--candidate", str(c)]
    for d in dims:
        cmd += ["--dims", d]
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", NVSHMEM_DISABLE_NVLS="1", TORCH_SYMM_MEM_DISABLE_MULTICAST="1")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        text, rc = proc.stdout, proc.returncode
        err = proc.stderr
    except subprocess.TimeoutExpired as exc:
        text = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        rc, err = -1, "timeout"
    records = [json.loads(line[7:]) for line in text.splitlines() if line.startswith("RESULT ")]
    if rc != 0:
        records.append({"error": f"driver exit {rc}", "stderr": err[-3000:]})
    return records


def point_labels(backends: Sequence[str] = ("lsa", "gin")) -> list[str]:
    space = _workload().space(Topology(world=2))
    return [p.label() for p in space.points() if p.backend in backends]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", type=Path, required=True)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--bench", action="append", default=[], help="point label to benchmark (repeatable)")
    ap.add_argument("--bench-dims", action="append", default=[])
    ap.add_argument("--verify", default="", help="'all', 'all-lsa' or comma-separated labels to verify at verify shapes")
    ap.add_argument("--extra", action="append", default=[], help="extra .cu candidate files to build and bench")
    ap.add_argument("--out", type=Path, default=None, help="write records as JSON lines here")
    args = ap.parse_args(argv)
    tc = Toolchain.detect()
    print(f"toolchain: {tc.fingerprint()} cublasLt={tc.cublaslt.libdir if tc.cublaslt else None}", flush=True)
    sink = open(args.out, "a") if args.out else None

    def emit(recs: list[dict], tag: str) -> None:
        for r in recs:
            r["phase"] = tag
            print(json.dumps(r), flush=True)
            if sink:
                sink.write(json.dumps(r) + "\n")
                sink.flush()

    t0 = time.time()
    core = build(args.bench, args.build, tc, jobs=args.jobs)
    extras = []
    for path in args.extra:
        r = tc.compile([Path(path)], args.build / (Path(path).stem + ".so"), include_dirs=[csrc_dir() / "include"],
                       libraries=("cublasLt",))
        if r.ok:
            extras.append(r.output)
        else:
            print(f"COMPILE FAIL {path}\n{r.log[-3000:]}", flush=True)
    print(f"built core in {time.time() - t0:.0f}s", flush=True)
    named = {"all": ("lsa", "gin"), "all-lsa": ("lsa",)}
    rest_labels = (point_labels(named[args.verify]) if args.verify in named
                   else [x for x in args.verify.split(",") if x])
    rest_labels = [x for x in rest_labels if x not in args.bench]
    pool = cf.ThreadPoolExecutor(max_workers=1)
    rest = pool.submit(build, rest_labels, args.build, tc, args.jobs, False) if rest_labels else None
    if args.bench_dims:
        cands = [core["seed"]] + [core[x] for x in args.bench if x in core] + extras
        emit(run_driver(core["driver"], core["plugin"], cands, args.bench_dims, seeds="1", bench=20, warmup=5,
                        parts=1), "bench")
        print(f"bench done at {time.time() - t0:.0f}s", flush=True)
    if rest is not None:
        built = rest.result()
        print(f"built {len(built)}/{len(rest_labels)} more at {time.time() - t0:.0f}s", flush=True)
        verify = [core[x] for x in args.bench if x in core] + [built[x] for x in rest_labels if x in built]
        emit(run_driver(core["driver"], core["plugin"], verify, ["512,256,384", "1024,512,256"], seeds="1,2",
                        bench=0), "verify")
        print(f"verify done at {time.time() - t0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
