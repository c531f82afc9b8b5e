"""`cuco transform SEED.cu [-o OUT.cu]`: print the analysis, write the device-initiated program atomically,
say how it was verified. Exit status 0 on success, 2 on bad input (nothing written)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from cuco import atomic
from cuco.errors import CucoError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cuco transform",
                                description="Turn a host-driven CUDA+NCCL program into a device-initiated one "
                                            "(NCCL device API, LSA) with EVOLVE-BLOCK markers.")
    p.add_argument("seed", type=Path, help="host program (.cu): standalone, or in cuco candidate-ABI form")
    p.add_argument("-o", "--output", type=Path, help="where to write the result (default: SEED_device.cu)")
    p.add_argument("-I", "--include", type=Path, action="append", default=[], help="extra include directory")
    p.add_argument("--model", help="LLM model (litellm name) for programs no rule covers")
    p.add_argument("--no-input-check", action="store_true", help="skip compiling the input first")
    p.add_argument("--no-run", action="store_true", help="only compile the result, even where GPUs exist")
    p.add_argument("--quiet", action="store_true", help="do not print the analysis report")
    return p


def _llm(model: str | None) -> Any:
    if not model:
        return None
    from cuco.llm import LLMClient, LLMConfig  # lazy: litellm is optional
    client = LLMClient(LLMConfig(models=model))
    client.check()  # unknown model or missing API key: said before the input is even compiled
    return client


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file, so no reader sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, text)


def check_output(out: Path, seed: Path) -> None:
    """Refuse, before any compile, an output that would overwrite the input or cannot be written."""
    default = seed.with_name(seed.stem + "_device.cu")
    if out.exists() and seed.exists() and os.path.samefile(out, seed):
        raise CucoError(f"-o {out} is the input file; writing there would overwrite the host program: pass another "
                        f"-o (or none, for {default})")
    if out.is_dir():
        raise CucoError(f"-o {out} is a directory; name a file, e.g. -o {out / default.name}")
    existing = out.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise CucoError(f"-o {out}: {existing} is a file, not a directory; choose another -o")
    target = out if out.exists() else existing
    if not os.access(target, os.W_OK) or not os.access(existing, os.W_OK | os.X_OK):
        raise CucoError(f"-o {out}: {target} is not writable; choose a writable -o or fix its permissions")


def transform_main(argv: Sequence[str] | None = None) -> int:
    """Run `cuco transform` with `argv`; returns the exit status (2 on an error)."""
    args = _parser().parse_args(argv)
    from cuco.fastpath.agent import FastPathAgent
    out = args.output or args.seed.with_name(args.seed.stem + "_device.cu")
    try:
        if not args.seed.exists():
            raise CucoError(f"{args.seed} does not exist")
        check_output(out, args.seed)
        agent = FastPathAgent(_llm(args.model), check_input=not args.no_input_check, run_on_gpu=not args.no_run,
                              include_dirs=tuple(args.include))
        result = agent.run(args.seed)
    except CucoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(result.report)
    try:
        write_atomic(out, result.code)
    except OSError as exc:
        print(f"error: cannot write {out} ({exc.strerror or exc}); choose another -o", file=sys.stderr)
        return 2
    how = ", ".join(result.rules_applied) if result.rules_applied else f"{result.llm_calls} LLM call(s)"
    print(f"wrote {out} ({how}); {result.verified_how}")
    return 0


if __name__ == "__main__":
    sys.exit(transform_main())
