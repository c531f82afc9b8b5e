"""FastPathAgent: host-driven CUDA+NCCL program -> correct device-initiated program. Known patterns go
through the rules (no LLM); anything else goes to the two-stage LLM loop when an LLM is given."""

from __future__ import annotations

import contextlib
import logging
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import attrs

from cuco.fastpath import annotate
from cuco.fastpath.analyze import analyze
from cuco.fastpath.llm_loop import CheckOutcome, LLMLoop
from cuco.fastpath.model import Analysis, FastPathError
from cuco.fastpath.render import render_report
from cuco.fastpath.rules import CONSERVATIVE
from cuco.fastpath.transform import plan, transform
from cuco.fastpath import verify


@attrs.frozen
class FastPathResult:
    """A rewritten program: how it was made (rules or LLM calls), how it was verified, and the report."""

    code: str
    analysis: Analysis
    rules_applied: tuple[str, ...]
    llm_calls: int
    verified_how: str          # "compiled only (no GPU)", "verified on N GPUs", ...
    report: str
    directives = CONSERVATIVE


#: What each build is, as progress says it.
_BUILDS = {"original": "original program", "device": "device-initiated program",
           "llm_A": "LLM's first-stage program", "llm_B": "LLM's device-initiated program"}


def _load(source: str | Path) -> tuple[str, str, Path | None]:
    """(text, display path, directory for relative includes)."""
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and len(source) < 4096
                                    and Path(source).suffix and Path(source).exists()):
        p = Path(source)
        try:
            return p.read_text(), str(p), p.resolve().parent
        except UnicodeDecodeError:
            raise FastPathError(f"{p} is not a text file; give a CUDA C++ host program (.cu)") from None
        except OSError as exc:
            raise FastPathError(f"cannot read {p}: {exc.strerror}") from None
    if isinstance(source, str) and "\n" not in source and Path(source).suffix in (".cu", ".cpp", ".cc", ".cuh"):
        raise FastPathError(f"{source} does not exist")
    return str(source), "<code>", None


log = logging.getLogger("cuco.fastpath")


class FastPathAgent:
    """`run(source_path | code)` -> FastPathResult. `llm`: any object with complete(messages, temperature).

    `progress` receives a sentence as each step starts and ends, and every `heartbeat_s` seconds while one runs
    (an nvcc build takes tens of seconds); by default the sentences go to the "cuco.fastpath" logger at INFO.
    """

    def __init__(self, llm: Any = None, *, check_input: bool = True, run_on_gpu: bool = True,
                 include_dirs: tuple[Path, ...] = (), max_llm_iterations: int = 3, workdir: Path | None = None,
                 progress: Callable[[str], None] | None = None, heartbeat_s: float = 10.0):
        self.progress = progress or log.info
        self.heartbeat_s = heartbeat_s
        self.llm = llm
        self.check_input = check_input
        self.run_on_gpu = run_on_gpu
        self.include_dirs = tuple(Path(d) for d in include_dirs)
        self.max_llm_iterations = max_llm_iterations
        self.workdir = workdir
        self._work = Path(workdir) if workdir is not None else Path(tempfile.gettempdir())

    # -- steps -------------------------------------------------------------------------------------
    def _dirs(self, base: Path | None) -> list[Path]:
        return ([base] if base else []) + list(self.include_dirs)

    @contextlib.contextmanager
    def _step(self, what: str) -> Iterator[None]:
        """Say that `what` starts, that it still runs every heartbeat_s seconds, and how long it took."""
        self.progress(f"fast path: {what} ...")
        start, stop = time.monotonic(), threading.Event()

        def beat() -> None:
            while not stop.wait(self.heartbeat_s):
                self.progress(f"fast path: {what}: {time.monotonic() - start:.0f} s so far")

        ticker = threading.Thread(target=beat, name="cuco-fastpath-progress", daemon=True)
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join()
        self.progress(f"fast path: {what}: done in {time.monotonic() - start:.1f} s")

    def _build(self, code: str, analysis: Analysis, base: Path | None, name: str) -> verify.BuildOutcome:
        work = self._work / name
        with self._step(f"compiling the {_BUILDS.get(name, name)} (nvcc)"):
            return verify.build(code, workdir=work, include_dirs=self._dirs(base),
                                shared=analysis.form == "candidate_abi", name=name)

    def _check_input(self, text: str, analysis: Analysis, base: Path | None) -> verify.BuildOutcome:
        out = self._build(text, analysis, base, "original")
        if not out.ok:
            where = out.summary() if out.errors else out.filtered(text)
            raise FastPathError(f"{analysis.path} does not compile as given, fix it first: {where}")
        return out

    def _verify(self, code: str, analysis: Analysis, base: Path | None,
                original: verify.BuildOutcome | None, text: str,
                built: verify.BuildOutcome | None = None) -> tuple[bool, str]:
        built = built or self._build(code, analysis, base, "device")
        if not built.ok:
            return False, f"the transformed program does not compile: {built.summary()}\n{built.filtered(code)}"
        if analysis.form == "candidate_abi":  # whatever the GPU count: the harness, not this agent, runs it
            return True, "compiled only (candidate ABI: verify it with the cuco harness)"
        n = verify.gpu_count() if self.run_on_gpu else 0
        if n == 0:   # one GPU is enough: the programs run at world size 1 (an LSA team of one)
            return True, "compiled only (no GPU)"
        if original is None or original.binary is None:
            original = self._check_input(text, analysis, base)
        with self._step("running the original and the device-initiated program to compare their outputs"):
            ok, detail = verify.compare_runs(original.binary, built.binary)  # type: ignore[arg-type]
        return ok, f"verified on {n} GPUs" if ok else detail

    # -- entry point ---------------------------------------------------------------------------------
    def run(self, source: str | Path) -> FastPathResult:
        """The device-initiated program for `source`. Build files go to `workdir`, or to a temporary directory
        that is removed when this returns or raises."""
        if self.workdir is not None:
            self._work = Path(self.workdir)
            return self._run(source)
        with tempfile.TemporaryDirectory(prefix="cuco-fastpath-") as tmp:
            self._work = Path(tmp)
            return self._run(source)

    def _run(self, source: str | Path) -> FastPathResult:
        text, path, base = _load(source)
        analysis = analyze(text, path)
        self.progress(f"fast path: {path}: {len(analysis.collectives)} host collective call(s) to rewrite")
        # every refusal of the rules (each names its line and construct) goes to the LLM loop when there is one
        rule_problems = list(plan(analysis).problems)
        if not analysis.collectives and not any(p.line for p in rule_problems):
            raise FastPathError(f"{path}: no NCCL collective or send/recv call found (looked for "
                                "ncclAllGather, ncclAlltoAll, ncclReduceScatter, ncclAllReduce, ncclBroadcast, "
                                "ncclReduce, ncclSend/ncclRecv); nothing to make device-initiated")
        if rule_problems and self.llm is None:
            lines = "\n".join(f"  - {p.message}" for p in rule_problems)
            raise FastPathError(f"{path}: no rule covers this program and no LLM was given:\n{lines}\n"
                                "Pass an LLM (FastPathAgent(llm=...) / --model) or rewrite these calls.")
        original = self._check_input(text, analysis, base) if self.check_input else None
        if not rule_problems:
            result = transform(analysis, text)
            code, rules, calls = result.code, result.rules_applied, 0
            ok, how = self._verify(code, analysis, base, original, text)
            if not ok:
                raise FastPathError(f"{path}: the rule-based program failed verification: {how}")
        else:
            loop = LLMLoop(self.llm, self._llm_check(analysis, base, original, text), self.max_llm_iterations)
            res = loop.run(text, analysis, rule_problems)
            if not res.ok:
                last = res.attempts[-1].message if res.attempts else ""
                raise FastPathError(f"{path}: the LLM path did not converge in {res.llm_calls} calls: {last[:800]}")
            code, rules, calls = res.code, (), res.llm_calls
            if annotate.marker_lines(code) == []:
                code = annotate.wrap(code, "program")
            ok, how = self._verify(code, analysis, base, original, text)
        report = render_report(analysis) + f"\nRules applied: {', '.join(rules) or 'none'}\nLLM calls: {calls}\n" \
                                           f"Design point: {CONSERVATIVE.label()}\nVerification: {how}"
        return FastPathResult(code, analysis, tuple(rules), calls, how, report)

    def _llm_check(self, analysis: Analysis, base: Path | None, original: verify.BuildOutcome | None, text: str):
        def check(stage: str, code: str) -> CheckOutcome:
            if stage == "B":   # cheap check first: no host collective may remain
                try:
                    left = analyze(code).collectives
                except FastPathError as exc:
                    return CheckOutcome(False, str(exc))
                if left:
                    return CheckOutcome(False, "host collectives remain at lines " +
                                        ", ".join(str(c.line) for c in left),
                                        tuple((c.line, f"{c.name} is a host collective") for c in left))
            built = self._build(code, analysis, base, f"llm_{stage}")
            if not built.ok:
                return CheckOutcome(False, f"nvcc failed: {built.summary()}", built.errors)
            if stage == "B":
                ok, how = self._verify(code, analysis, base, original, text, built)
                if not ok:
                    return CheckOutcome(False, how)
            return CheckOutcome(True, "")
        return check

