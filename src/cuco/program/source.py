"""A user's host program (`cuco run prog.cu`): loaded, checked, and observed.

The harness cannot own a whole program's allocations the way it owns a workload plugin's, so it observes the
program instead (csrc/include/cuco/program/observe.h): the *observed* text is the program with that header
included first and region markers around each pipeline range (the statements from the first kernel that feeds
a collective to the last that consumes one, cuco.fastpath.pipeline.pipeline_ranges). The observed original is
the reference; every candidate is the same observed text rewritten, so both are timed over the same statements
and compared on the same read-backs.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from cuco.errors import CucoError
from cuco.fastpath import parse as P
from cuco.fastpath.analyze import analyze
from cuco.fastpath.model import Analysis
from cuco.fastpath.pipeline import pipeline_ranges
from cuco.fastpath.transform import plan
from cuco.fastpath.verify import BuildOptions
from cuco.program import diagnostics

OBSERVE_INCLUDE = '#include "cuco/program/observe.h"  // cuco: read-backs and timed regions (inert unless observed)\n'
#: `argv[1]`, `argc > 1`, ...: the program reads command-line arguments.
_ARGS = re.compile(r"\bargv\s*\[\s*[1-9]|\bargc\s*(?:[<>]=?|[!=]=)\s*[1-9]|\b(?:getopt|getopt_long)\s*\(")
_INIT_RANK = ("ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitRankScalable")
#: The name of a rank that a launcher (torchrun, srun, mpirun) sets, as a string in the program.
_RANK_ENV = re.compile(r'"(?:RANK|LOCAL_RANK|OMPI_COMM_WORLD_RANK|PMI_RANK|SLURM_PROCID)"')
#: Calls that start processes or MPI: a program reaching one from main starts its own ranks (or needs mpirun).
_SPAWNS = frozenset({"fork", "vfork", "posix_spawn", "posix_spawnp", "execl", "execlp", "execle", "execv", "execvp",
                     "execvpe", "execve", "system", "popen", "MPI_Init", "MPI_Init_thread", "MPI_Comm_spawn"})
#: How a program of one process per GPU gets its ranks (`cuco run --launcher`): auto (torchrun where
#: started_by_launcher says so, else self), torchrun (cuco starts --world copies, rank_launch.py) or self (it starts
#: them itself, fork/exec: cuco runs one copy).
LAUNCHERS = ("auto", "torchrun", "self")
_LOCAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)


class ProgramError(CucoError):
    """A host program cuco cannot run as given; the message names what to change."""


def _name(path: Path) -> str:
    stem = re.sub(r"[^A-Za-z0-9_]", "_", path.stem) or "program"
    return stem if stem[0].isalpha() else f"p_{stem}"


@attrs.frozen
class HostProgram:
    """A host-driven CUDA + NCCL program and its observed form."""

    path: Path
    text: str = attrs.field(repr=False)
    analysis: Analysis = attrs.field(repr=False, eq=False)
    observed: str = attrs.field(repr=False)
    sites: int                                  # timed regions (pipeline ranges)
    build: BuildOptions = BuildOptions()        # include dirs, libraries and flags beyond what cuco finds itself
    #: One process per GPU that a launcher starts (torchrun style): cuco starts the W copies (rank_launch.py).
    started_by_launcher: bool = False

    @property
    def name(self) -> str:
        """An identifier made from the file name (letters, digits and _)."""
        return _name(self.path)

    @classmethod
    def load(cls, path: str | Path, build: BuildOptions = BuildOptions(), launcher: str = "auto") -> "HostProgram":
        """Read and check `path` (built with `build`, its ranks started as `launcher` says: LAUNCHERS); raises
        ProgramError naming the fix for a program cuco cannot run."""
        p = Path(path)
        if p.suffix not in (".cu", ".cpp", ".cc", ".cxx"):
            raise ProgramError(f"{p}: cuco run takes a CUDA host program (.cu) or a workload name/folder")
        try:
            text = p.read_text()
        except FileNotFoundError:
            raise ProgramError(f"{p}: no such file; pass the path of your .cu program") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ProgramError(f"{p}: cannot read it as UTF-8 text ({exc})") from None
        return attrs.evolve(cls.from_text(text, p, launcher), build=build)

    @classmethod
    def from_text(cls, text: str, path: Path, launcher: str = "auto") -> "HostProgram":
        """The program in `text` (read from `path`), checked; raises ProgramError naming the fix if it cannot run.
        `launcher` (LAUNCHERS) overrides how a program of one process per GPU is taken to get its ranks."""
        if launcher not in LAUNCHERS:
            raise ProgramError(f"--launcher must be one of {', '.join(LAUNCHERS)}, got {launcher!r}")
        if P.syntax_errors(P.parse(text)):   # the compiler, not the analysis, says what is wrong
            _refuse_if_it_does_not_compile(text, path)
        a = analyze(text, str(path))
        if a.form != "standalone":
            raise ProgramError(f"{path}: this is a cuco candidate (it defines cuco_candidate_launch); `cuco run` takes "
                               "a standalone host program with a main()")
        if not a.collectives:
            raise ProgramError(f"{path}: no NCCL collective or send/recv call found, so there is no communication "
                               "to move onto the GPU; cuco run needs a program that calls ncclAllGather, "
                               "ncclAllReduce, ncclSend/ncclRecv, ...")
        m = _ARGS.search(text)
        if m:
            line = text.count("\n", 0, m.start()) + 1
            raise ProgramError(f"{path}:{line}: the program reads command-line arguments (`{m.group(0)}`); cuco runs it "
                               "without any. Give the value a default in the source, or read it from an environment "
                               "variable (getenv), then run cuco again")
        blocked = plan(a).problems
        if blocked:
            lines = "\n".join(f"  - {p.message}" for p in blocked)
            raise ProgramError(f"{path}: the rule-based fast path cannot rewrite this program, so there is nothing to "
                               f"search offline:\n{lines}\n(`cuco transform {path} --model MODEL` lets an LLM try)")
        reached, names_rank = _from_main(_with_local_headers(text, path.parent))
        mpi = sorted(reached & {"MPI_Init", "MPI_Init_thread"})
        if mpi:
            raise ProgramError(f"{path}: the program calls {mpi[0]}, and cuco has no mpirun to start it with; cuco "
                               "starts a program's ranks itself as torchrun would (RANK, LOCAL_RANK, WORLD_SIZE, "
                               "MASTER_ADDR, MASTER_PORT set in each copy) or lets it start them (fork/exec). Read the "
                               "rank from RANK and pass the NCCL unique id without MPI (a file or a socket), then run "
                               "cuco again")
        observed, sites = observe_text(text, a)
        model = launch_model(a)
        if launcher != "auto" and model != "process-per-gpu":
            raise ProgramError(f"{path}: --launcher {launcher} says how a program of one process per GPU gets its "
                               f"ranks, and this one is {model} (cuco runs it as one process): drop --launcher")
        launched = model == "process-per-gpu" and (launcher == "torchrun" or (launcher == "auto"
                                                                               and _launched(reached, names_rank)))
        return cls(path, text, a, observed, sites, started_by_launcher=launched)

    def observed_analysis(self) -> Analysis:
        """The analysis of the observed form (the program with its timed regions marked)."""
        return analyze(self.observed, str(self.path))


def observe_text(text: str, a: Analysis) -> tuple[str, int]:
    """`text` with observe.h included first and cuco_region_begin/end around each pipeline range; the number of
    regions. Markers are whole lines, so line-based ranges computed on the observed text stay inside them; the end
    marker jumps back to the start while observe.h asks for another instance (inert unless observed)."""
    src = P.parse(text)
    ranges = sorted({(lo, hi) for lo, hi, _label in pipeline_ranges(src, a)})
    if not ranges:
        raise ProgramError(f"{a.path}: found no statement range around the collectives to time; keep each "
                           "collective in a function body with the kernels that feed and consume it")
    all_devices = 1 if launch_model(a) == "single-process" else 0
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    out: list[str] = []
    starts = {lo: i for i, (lo, _hi) in enumerate(ranges)}
    ends = {hi: i for i, (_lo, hi) in enumerate(ranges)}
    for n, line in enumerate(lines, 1):
        indent = line[:len(line) - len(line.lstrip())]
        if n in starts:
            out.append(f"{indent}cuco_rep_{starts[n]}: cuco_region_begin({starts[n]}, {all_devices});\n")
        out.append(line)
        if n in ends:   # a jump back, not a loop: no new scope, so the range's declarations stay visible after it
            out.append(f"{indent}if (cuco_region_end({ends[n]}, {all_devices})) goto cuco_rep_{ends[n]};  "
                       "// again while CUCO_REGION_REPEATS asks\n")
    return OBSERVE_INCLUDE + "".join(out), len(ranges)


def launch_model(a: Analysis) -> str:
    """How the program maps ranks to processes: 'single-process' (one process drives every GPU: ncclCommInitAll,
    or ncclCommInitRank inside an NCCL group, which is how one thread creates several ranks), 'thread-per-gpu',
    'process-per-gpu', or the analysis's answer for anything else."""
    if a.launch_model == "process-per-gpu":
        inits = [c.line for c in a.comm_calls if c.api in _INIT_RANK]
        if any(g.start_line <= ln <= g.end_line for g in a.groups for ln in inits):
            return "single-process"
    return a.launch_model


def _with_local_headers(text: str, folder: Path) -> list[str]:
    """`text` and the headers it includes from its own folder (`#include "..."`), transitively."""
    texts, seen, todo = [], set(), [(text, folder)]
    while todo and len(seen) < 32:
        t, here = todo.pop()
        texts.append(t)
        for name in _LOCAL_INCLUDE.findall(t):
            header = (here / name).resolve()
            if header not in seen and header.is_file():
                seen.add(header)
                try:
                    todo.append((header.read_text(errors="replace"), header.parent))
                except OSError:
                    continue
    return texts


def _from_main(texts: list[str]) -> tuple[set[str], bool]:
    """What main reaches through the functions the texts define (a header may define a launcher the program never
    calls): (the functions and library calls reached, whether a reached function names a launcher's rank)."""
    calls: dict[str, set[str]] = {}
    names_rank: set[str] = set()
    for t in texts:
        src = P.parse(t)
        for node in P.walk(src.root):
            if node.type == "call_expression":
                caller = P.function_name(src, P.enclosing(node, ("function_definition",)))
                calls.setdefault(caller, set()).add(P.callee_name(src, node))
            elif node.type == "string_literal" and _RANK_ENV.fullmatch(src.node_text(node)):
                names_rank.add(P.function_name(src, P.enclosing(node, ("function_definition",))))
    seen, todo = {"main"}, ["main"]
    while todo:
        for callee in calls.get(todo.pop(), ()):
            if callee not in seen:
                seen.add(callee)
                todo.append(callee)
    return seen, bool(seen & names_rank)


def started_by_launcher(text: str, path: Path) -> bool:
    """True for a program whose main, through its own functions or those of headers from its folder, names a
    launcher's rank variable (RANK, LOCAL_RANK, ...) and starts no process and no MPI: torchrun (or srun) starts
    its ranks."""
    return _launched(*_from_main(_with_local_headers(text, path.parent)))


def _launched(reached: set[str], names_rank: bool) -> bool:
    return names_rank and not reached & _SPAWNS


def _refuse_if_it_does_not_compile(text: str, path: Path) -> None:
    """Compile `text` as the user wrote it; ProgramError with the compiler's errors at the user's lines if it
    fails. Nothing is said when no compiler is found: the analysis's checks then speak."""
    import tempfile

    from cuco.fastpath.verify import build, host_toolchain
    from cuco.toolchain import ToolchainError

    try:
        toolchain = host_toolchain()
    except ToolchainError:
        return
    name = _name(path)
    with tempfile.TemporaryDirectory(prefix="cuco-original-") as work:
        out = build(text, workdir=Path(work), include_dirs=[path.resolve().parent], toolchain=toolchain, name=name,
                    cache=False)
    if not out.ok:
        identity = {n: n for n in range(1, text.count("\n") + 2)}
        log = diagnostics.in_user_terms(out.log, f"{name}.cu", identity, path)
        raise ProgramError(f"{path}: the program does not compile as given:\n{diagnostics.errors(log)}")
