"""The `cuco` command: run a workload's search, transform a host program, inspect spaces and toolchains."""

from __future__ import annotations

import argparse
import logging
import shlex
import signal
import sys
import threading
from typing import TYPE_CHECKING, Sequence

from cuco.errors import CucoError

#: `cuco run --launcher` (cuco.program.source.LAUNCHERS; spelled here so `cuco --help` loads no parser)
LAUNCHERS = ("auto", "torchrun", "self")

if TYPE_CHECKING:
    from cuco.fastpath.verify import BuildOptions


def _cmd_workloads(args: argparse.Namespace) -> int:
    from cuco import workloads

    for name in workloads.available():
        wl = workloads.get(name)
        print(f"{name}: {wl.summary()}")
    return 0


def _cmd_space(args: argparse.Namespace) -> int:
    from cuco.design_space import Topology
    from cuco.target import resolve

    wl = resolve(args.workload)   # a built-in workload, a workload folder or a host program, as `cuco run` takes
    if args.world < 1:
        raise CucoError(f"--world must be >= 1 (ranks, one GPU each), got {args.world}")
    space = wl.space(Topology(world=args.world))
    print(space.prompt_text())
    if args.list:
        for p in space.points():
            print(p.label())
    return 0


def _cmd_doctor(args: argparse.Namespace) -> int:
    from cuco.harness.runner import gpu_count
    from cuco.toolchain import Toolchain

    tc = Toolchain.detect()
    print(f"nvcc      {tc.nvcc} (CUDA {tc.cuda_version})")
    print(f"NCCL      {tc.nccl.version} from {tc.nccl.origin}: {tc.nccl.include}")
    if tc.cublaslt:
        print(f"cuBLASLt  {tc.cublaslt.origin}: {tc.cublaslt.libdir / tc.cublaslt.link_name}")
    print(f"arch      {tc.arch}")
    print(f"GPUs      {gpu_count()}")
    return 0


class _BarSafeHandler(logging.Handler):
    """Writes records to the current stderr through tqdm, which clears a progress bar first and redraws it after."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from tqdm import tqdm  # noqa: PLC0415 (loaded with the first message, not with the command)

            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:  # a logging handler must never raise into the run
            self.handleError(record)


def _show_log() -> None:
    """Show the "cuco" logger's messages (INFO and up) on stderr, with one handler however many commands run in
    this process."""
    log = logging.getLogger("cuco")
    if not any(isinstance(h, _BarSafeHandler) for h in log.handlers):
        handler = _BarSafeHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False  # shown once, here, not again by a root handler


def build_options(args: argparse.Namespace) -> "BuildOptions | None":
    """`cuco run`'s --include/--link/--cflags as the BuildOptions of a host program (None when none is given)."""
    from cuco.fastpath.verify import BuildOptions

    if not (args.include or args.link or args.cflags):
        return None
    return BuildOptions(args.include, args.link, [f for c in args.cflags for f in shlex.split(c)])


def _cmd_run(args: argparse.Namespace) -> int:
    from cuco.run import RunOptions, run_workload

    _show_log()

    opts = RunOptions(
        workload=args.workload, world=args.world, shape=args.shape, evaluations=args.evals,
        run_dir=args.run_dir, resume=args.resume, seed=args.seed, model=args.model,
        budget_usd=args.budget_usd, progress=not args.quiet, price_per_mtok=args.price_per_mtok,
        executor=args.executor, address=args.address, build=build_options(args), first_points=args.first_points,
        launcher=args.launcher, confirm=not args.no_confirm,
    )
    summary = run_workload(opts)
    print(summary.text())
    from cuco.report import ReportError, write_report

    if summary.measured:  # the timeline of the host program and the best candidates, beside the report
        from cuco.report.timeline import trace_run

        try:
            for path in trace_run(summary.run_dir):
                print(f"timeline: {path}")
        except (CucoError, OSError) as exc:
            print(f"cuco: no timeline ({exc})", file=sys.stderr)
    try:
        print(f"report: {write_report(summary.run_dir)}")
    except (ReportError, OSError) as exc:  # the run itself is complete and saved; only its page is missing
        print(f"cuco: the report could not be written ({exc}); `cuco report {summary.run_dir}` retries",
              file=sys.stderr)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from cuco.report import write_report

    if args.trace:
        from cuco.report.timeline import trace_run

        for path in trace_run(args.run_dir, top=args.trace):
            print(f"timeline: {path}")
    print(write_report(args.run_dir, args.out))
    return 0


def _cmd_transform(args: argparse.Namespace) -> int:
    from cuco.fastpath.cli import transform_main

    return transform_main(args.args)


def _price(text: str) -> tuple[float, float]:
    try:
        pin, pout = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: write two prices, e.g. 0.15,0.60") from None
    if not (pin >= 0 and pout >= 0):
        raise argparse.ArgumentTypeError(f"{text!r}: prices must be >= 0")
    return pin, pout


def build_parser() -> argparse.ArgumentParser:
    """The `cuco` argument parser, with its run, transform, report, space, workloads and doctor commands."""
    from cuco import __version__

    p = argparse.ArgumentParser(prog="cuco", description=__doc__)
    p.add_argument("--version", action="version", version=f"cuco {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="fast path + search on a workload or your own program; writes the best "
                       "verified kernel to RUN_DIR/best/")
    r.add_argument("workload", help="built-in workload name (see `cuco workloads`), a workload folder, or a host "
                   "CUDA+NCCL program (.cu)")
    r.add_argument("--world", type=int, default=None,
                   help="ranks (GPUs) per evaluation (default: the workload's, 2 for built-ins, 1 for a program; on "
                   "--resume the run's)")
    r.add_argument("--shape", default=None,
                   help="problem size, e.g. 8192,8192,8192 (default: the workload's first; on --resume the run's)")
    r.add_argument("--evals", type=int, default=None,
                   help="candidates to evaluate in all, the fast path's included (default 40; on --resume the run's)")
    r.add_argument("--run-dir", default=None, help="where the database and report go (default runs/<workload>-<time>)")
    r.add_argument("--resume", action="store_true", help="continue the run in --run-dir")
    r.add_argument("--seed", type=int, default=None, help="random seed of the search (default 0; on --resume the run's)")
    r.add_argument("--model", default=None, help="litellm model for LLM mutations (default: none, offline)")
    r.add_argument("--budget-usd", type=float, default=None,
                   help="LLM spending cap in USD (default 5; on --resume, the run's cap)")
    r.add_argument("--price-per-mtok", type=_price, default=None, metavar="IN,OUT",
                   help="USD per million input and output tokens, for a --model litellm has no price for")
    r.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="where candidates are evaluated: this host's GPUs (default) or a Ray cluster")
    r.add_argument("--address", default=None,
                   help="with --executor ray: the head node (host:port); default: a new local Ray instance")
    r.add_argument("--include", action="append", default=[], metavar="DIR",
                   help="a host program's extra include dir (repeatable); cuBLAS, cuBLASLt, cuRAND, cuDNN, NVTX and "
                        "NVSHMEM headers a program includes are found and linked without it")
    r.add_argument("--link", action="append", default=[], metavar="LIB",
                   help="a library to link a host program with (repeatable): a name cuco knows (cudnn, curand, ...), "
                        "a library file, or a -l name")
    r.add_argument("--cflags", action="append", default=[], metavar='"FLAGS"',
                   help='more nvcc flags for a host program, e.g. --cflags "-DUSE_FP16 -lineinfo" (one flag alone: '
                        '--cflags=-DUSE_FP16)')
    r.add_argument("--launcher", choices=LAUNCHERS, default="auto",
                   help="how a host program with one process per GPU gets its ranks: torchrun (cuco starts --world "
                        "copies with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and a fresh MASTER_PORT), self (it "
                        "starts them itself: fork/exec), or auto (default: torchrun when main names RANK or "
                        "LOCAL_RANK and starts no process, docs/own_program.md)")
    r.add_argument("--no-confirm", action="store_true",
                   help="offer a host program's fastest rewrite on the search's own rounds; by default it is re-timed "
                        "against the program in fresh interleaved rounds first (3 to 9 pairs of runs), and the "
                        "program itself stays the best unless those rounds show the rewrite faster")
    r.add_argument("--try", dest="first_points", action="append", default=[], metavar="POINT",
                   help="a design point to evaluate right after the fast path, before the search proposes its own "
                        "(repeatable; labels as `cuco space` prints them, e.g. lsa/fused/world/copy_engine/4MiB)")
    r.add_argument("--quiet", action="store_true", help="no progress (a bar on a terminal, one line per candidate "
                   "when redirected); the run's messages still go to stderr")
    r.set_defaults(fn=_cmd_run)

    t = sub.add_parser("transform", help="host-driven CUDA+NCCL program -> device-initiated program",
                       add_help=False)
    t.add_argument("args", nargs=argparse.REMAINDER, help="SEED.cu [-o OUT.cu] [-I DIR] [--model M] (see -h)")
    t.set_defaults(fn=_cmd_transform)

    rep = sub.add_parser("report", help="write a run's self-contained HTML report (works while the run writes)")
    rep.add_argument("run_dir", help="the run directory (holds candidates.db)")
    rep.add_argument("--out", default=None, help="where to write it (default RUN_DIR/report.html)")
    rep.add_argument("--trace", type=int, default=0, metavar="N",
                     help="first trace the host program and the N best candidates on this machine's GPUs (CUPTI)")
    rep.set_defaults(fn=_cmd_report)

    s = sub.add_parser("space", help="print the design space of a workload or of a host program (.cu)")
    s.add_argument("workload", help="a built-in workload, a workload folder or a host CUDA+NCCL program (.cu)")
    s.add_argument("--world", type=int, default=2)
    s.add_argument("--list", action="store_true", help="also list every legal point")
    s.set_defaults(fn=_cmd_space)

    sub.add_parser("workloads", help="list built-in workloads").set_defaults(fn=_cmd_workloads)
    sub.add_parser("doctor", help="show the detected compiler, NCCL, cuBLASLt, arch and GPUs").set_defaults(fn=_cmd_doctor)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `cuco` command line; returns the exit status (2 for a cuco or file error, 130 when interrupted)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["transform"]:  # its own parser (flags such as -h, -o, -I belong to it)
        from cuco.fastpath.cli import transform_main

        _show_log()  # the fast path's steps: nvcc builds take tens of seconds

        return transform_main(argv[1:])
    args = build_parser().parse_args(argv)
    main_thread = threading.current_thread() is threading.main_thread()   # where Python runs signal handlers
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    try:
        return int(args.fn(args) or 0)
    except CucoError as exc:
        print(f"cuco: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file or device problem of this machine, not a bug: no traceback
        where = f": {exc.filename}" if exc.filename else ""
        print(f"cuco: error: {exc.strerror or exc}{where}; check that path, its permissions and free space",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print("cuco: interrupted; `cuco run --resume --run-dir DIR` continues a run", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's preemption), raised where Ctrl-C would be: the same clean-up runs (temp build
    folders removed, candidate processes stopped), where the default action would end cuco like SIGKILL."""


def _on_sigterm(_signum: int, _frame: object) -> None:
    raise Terminated()


if __name__ == "__main__":
    sys.exit(main())
