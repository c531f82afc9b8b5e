"""The compute library's FMHA against other configurations of the same CUTLASS kernel and against torch SDPA (flash
and cuDNN) on ring attention's sweep shapes at W = 1: which tile and schedule the library should use, measured.

    python3 benchmarks/fmha_variants.py build [--out DIR]            # CPU machine: one binary per head dim and mask
    python3 benchmarks/fmha_variants.py run --json OUT.json [--md OUT.md] [--bin DIR] [--shapes s8192-d64,...]

`build` compiles benchmarks/probes/fmha_variants/fmha_variants.cu once per (D, causal) the shapes need (about a
minute each on 2 cores) into DIR (default .devcache/fmha_variants, carried to the GPU machine). `run`, on one GPU:
per shape, every variant's time (median of 7 CUDA-event rounds, each over `iters` launches), its O and LSE compared
with the library's own call on the same inputs, then torch SDPA on the same shape (randn inputs) in the same
process, back to back. A variant counts only if its O matches the library's (`o_max_rel_diff` <= 1e-2: the fp32
accumulation order of another tile differs, the result must not).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SOURCE = HERE / "probes" / "fmha_variants" / "fmha_variants.cu"
DEFAULT_BIN = ROOT / ".devcache" / "fmha_variants"
SHAPES = "s4096-d32,s8192-d64,s8192-d32,s4096-d64,llama3-8b,llama3-8b-full"
MAX_REL_DIFF = 1e-2


def binary_name(head_dim: int, causal: int) -> str:
    return f"fmha_variants_d{head_dim}_{'causal' if causal else 'full'}"


def shape_dims(names: str) -> list[tuple[str, dict[str, int]]]:
    """(name, dims) of each named attention_cp shape (S, HQ, HKV, D, CAUSAL), at W = 1."""
    sys.path.insert(0, str(ROOT / "src"))
    from cuco.workloads.attention_cp import shapes as cp_shapes

    out = []
    for name in (n.strip() for n in names.split(",") if n.strip()):
        dims = cp_shapes.parse(name).dims
        out.append((name, dict(zip(cp_shapes.DIM_NAMES, dims))))
    return out


def build(out_dir: Path, names: str) -> int:
    """Compile one binary per (D, causal) of the shapes; nvcc's log beside each; non-zero if any failed."""
    sys.path.insert(0, str(ROOT / "src"))
    import attrs

    from cuco.toolchain import csrc_dir, default_toolchain

    tc = attrs.evolve(default_toolchain(), arch="sm_90a")
    needed = sorted({(d["D"], d["CAUSAL"]) for _, d in shape_dims(names)})
    failed = 0
    for head_dim, causal in needed:
        target = out_dir / binary_name(head_dim, causal)
        start = time.monotonic()
        res = tc.compile([SOURCE], target, shared=False, include_dirs=[csrc_dir() / "include"],
                         libraries=["cutlass"], extra=["-DNDEBUG", f"-DPROBE_D={head_dim}", f"-DPROBE_CAUSAL={causal}"])
        (out_dir / f"{target.name}.log").write_text(res.log)
        failed += not res.ok
        print(f"{target.name}: {'built' if res.ok else 'FAILED (see its .log)'} in {time.monotonic() - start:.0f} s",
              flush=True)
    return 1 if failed else 0


def run_binary(path: Path, dims: dict[str, int], iters: int) -> list[dict]:
    """The binary's JSON lines for one shape; a missing binary or a crash is one row with its reason."""
    if not path.exists():
        return [{"variant": "*", "error": f"{path} missing: run `fmha_variants.py build` and carry it"}]
    done = subprocess.run([str(path), str(dims["S"]), str(dims["HQ"]), str(dims["HKV"]), str(iters)],
                          capture_output=True, text=True, timeout=300)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0:
        rows.append({"variant": "*", "error": f"exit {done.returncode}: {done.stderr[-500:]}"})
    return rows


def summarize(name: str, dims: dict[str, int], variants: list[dict], anchor: dict) -> dict:
    """One shape's row: the library's time, the fastest variant that matches it, torch's best, and the ratios."""
    timed = {v["variant"]: v for v in variants if v.get("status") == 0 and "ms" in v}
    lib = timed.get("library")
    good = {k: v for k, v in timed.items() if k != "library_bf16" and v.get("o_max_rel_diff", 1.0) <= MAX_REL_DIFF}
    best = min(good, key=lambda k: good[k]["ms"]) if good else None
    row = {"shape": name, "dims": dims, "variants": variants, **anchor,
           "library_ms": lib and lib["ms"], "best_variant": best, "best_ms": best and good[best]["ms"]}
    if anchor.get("anchor_ms") and lib:
        row["library_vs_torch"] = anchor["anchor_ms"] / lib["ms"]
        row["best_vs_torch"] = anchor["anchor_ms"] / good[best]["ms"]
    return row


def markdown(meta: dict) -> str:
    lines = [f"# FMHA configurations at W = 1 - {meta['device']}, torch {meta['torch']}, {meta['date']}", "",
             "| shape | library (fp32 O) | library (bf16 O) | fastest matching variant | torch SDPA (backend) | "
             "torch / library | torch / fastest |", "|---|---|---|---|---|---|---|"]
    for r in meta["rows"]:
        v = {x["variant"]: x for x in r["variants"] if "ms" in x}
        f = lambda x: f"{x:.3f}" if isinstance(x, float) else "-"  # noqa: E731
        lines.append(f"| {r['shape']} | {f(r['library_ms'])} | {f(v.get('library_bf16', {}).get('ms'))} | "
                     f"{r['best_variant']} {f(r['best_ms'])} | {f(r.get('anchor_ms'))} ({r.get('anchor_backend')}) | "
                     f"{f(r.get('library_vs_torch'))} | {f(r.get('best_vs_torch'))} |")
    lines += ["", "Times in ms (median of 7 rounds of CUDA events). Every variant: "
              "`variants` in the JSON, with its TFLOP/s and its O and LSE against the library's."]
    return "\n".join(lines) + "\n"


def run(json_out: Path, md_out: Path | None, bin_dir: Path, names: str, iters: int) -> int:
    import torch

    from attention_cp import anchor  # a sibling script: torch SDPA, flash and cuDNN, the faster

    rows = []
    for name, dims in shape_dims(names):
        variants = run_binary(bin_dir / binary_name(dims["D"], dims["CAUSAL"]), dims, iters)
        rows.append(summarize(name, dims, variants, anchor(dims)))
        r = rows[-1]
        print(f"{name}: library {r['library_ms']} ms, fastest {r['best_variant']} {r['best_ms']}, torch "
              f"{r.get('anchor_ms')} ({r.get('anchor_backend')})", flush=True)
    meta = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows}
    json_out.write_text(json.dumps(meta, indent=1))
    if md_out:
        md_out.write_text(markdown(meta))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", type=Path, default=DEFAULT_BIN)
    b.add_argument("--shapes", default=SHAPES)
    r = sub.add_parser("run")
    r.add_argument("--json", type=Path, required=True)
    r.add_argument("--md", type=Path)
    r.add_argument("--bin", type=Path, default=DEFAULT_BIN)
    r.add_argument("--shapes", default=SHAPES)
    r.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    try:
        shape_dims(args.shapes)
    except Exception as exc:  # an unknown name or bad dims: refused before any build or GPU work
        raise SystemExit(f"--shapes: {exc}")
    sys.path.insert(0, str(HERE))
    if args.cmd == "build":
        return build(args.out, args.shapes)
    return run(args.json, args.md, args.bin, args.shapes, args.iters)


if __name__ == "__main__":
    sys.exit(main())
