"""LLM path of the fast path, for programs no rule covers. Two stages, each a bounded loop of
generate -> check -> judge: A adds the device-communication infrastructure and keeps the host collectives,
B replaces the host collectives with device-initiated LSA kernels. Every answer is compiled (and, where a
check says so, run); a failure becomes a judge prompt that quotes the error and the lines it points at.

`llm` is any object with `complete(messages, temperature) -> reply` where `reply.text` is the answer
(cuco.llm.LLMClient has that shape)."""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import attrs

from cuco.fastpath.model import Analysis, FastPathError, Problem
from cuco.fastpath.render import prompt_text

STAGES = ("A", "B")

SYSTEM = """You convert host-driven CUDA+NCCL programs into device-initiated ones with the NCCL device API \
(LSA: load/store over NVLink), NCCL >= 2.28, C++17, sm_90. Verified facts:
- symmetric memory: ncclMemAlloc(&p, bytes) (free with ncclMemFree), then inside ncclGroupStart/End \
ncclCommWindowRegister(comm, p, bytes, &win, NCCL_WIN_COLL_SYMMETRIC) on every rank;
- device communicator: ncclDevCommRequirements req = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER (when defined, else {}); \
req.lsaBarrierCount = number of CTAs that open barrier sessions; ncclDevCommCreate(comm, &req, &devComm) in a group;
- in a kernel: ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), devComm, ncclTeamLsa(devComm), \
devComm.lsaBarrier, blockIdx.x); bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel); peer memory via \
ncclGetLsaPointer(win, offset, peer); devComm.lsaRank / devComm.lsaSize; end with a second barrier so that no rank \
overwrites a buffer a peer still reads;
- teardown: ncclDevCommDestroy, ncclCommWindowDeregister, ncclMemFree, then ncclCommDestroy.
Keep the program's output format (its checksum lines) unchanged. Reply with the complete program in one ```cuda block."""

STAGE_TASK = {
    "A": "Stage A: add the infrastructure only. Allocate every communicated buffer with ncclMemAlloc, register "
         "windows, create the device communicator, destroy them at the end. KEEP every host NCCL collective as it is.",
    "B": "Stage B: replace every host NCCL collective and send/recv with a device kernel launched on the same "
         "stream (barrier session, pull from peers through ncclGetLsaPointer, reduce in fp32 for half/bf16, final "
         "barrier). No host collective may remain.",
}

_BLOCK = re.compile(r"```(?:cuda|cu|cpp|c\+\+|c)?[ \t]*\n(.*?)```", re.S)


@attrs.frozen
class CheckOutcome:
    """What the check of one stage's program found: success, or the message and the errors by line."""

    ok: bool
    message: str                                  # what failed (empty when ok)
    errors: tuple[tuple[int, str], ...] = ()      # (line, message) in the candidate program


@attrs.frozen
class Attempt:
    """One checked answer of the loop: its stage, iteration and outcome."""

    stage: str
    iteration: int
    ok: bool
    message: str


@attrs.frozen
class LoopResult:
    """The program the LLM loop ended with, whether it passed, and every attempt made."""

    code: str
    ok: bool
    llm_calls: int
    attempts: tuple[Attempt, ...]


Check = Callable[[str, str], CheckOutcome]     # (stage, code) -> outcome


def extract_code(text: str) -> str | None:
    """The longest fenced code block of a reply."""
    blocks = _BLOCK.findall(text or "")
    return max(blocks, key=len).strip() + "\n" if blocks else None


def locate(code: str, errors: Sequence[tuple[int, str]], context: int = 2, limit: int = 4) -> str:
    """Quote each error with the program lines around it ('>' marks the line)."""
    lines = code.splitlines()
    out = []
    for ln, msg in list(errors)[:limit]:
        out.append(f"error at line {ln}: {msg}")
        for i in range(max(1, ln - context), min(len(lines), ln + context) + 1):
            out.append(f"{'>' if i == ln else ' '} {i:5d} | {lines[i - 1]}")
    return "\n".join(out)


def judge_prompt(stage: str, code: str, outcome: CheckOutcome) -> str:
    """The prompt after a failed check: the failure with the lines it points at, and the fix asked for."""
    quoted = locate(code, outcome.errors) if outcome.errors else outcome.message[-3000:]
    return (f"Your stage {stage} program failed its check: {outcome.message.splitlines()[0] if outcome.message else ''}\n"
            f"{quoted}\n\nFirst say in one or two sentences what causes this failure and where, then give the "
            f"complete corrected program. {STAGE_TASK[stage]}")


class LLMLoop:
    """Bounded two-stage generate/check/judge loop."""

    def __init__(self, llm: Any, check: Check, max_iterations: int = 3, temperature: float = 0.2):
        if not callable(getattr(llm, "complete", None)):
            raise FastPathError("the LLM object needs a complete(messages, temperature) method (e.g. cuco.llm.LLMClient)")
        if max_iterations < 1:
            raise FastPathError("max_iterations must be at least 1")
        self.llm, self.check, self.max_iterations, self.temperature = llm, check, max_iterations, temperature

    def _ask(self, messages: list[dict[str, str]]) -> str:
        reply = self.llm.complete(messages, self.temperature)
        return getattr(reply, "text", reply if isinstance(reply, str) else "")

    def run(self, code: str, analysis: Analysis, refusals: Sequence[Problem] = ()) -> LoopResult:
        """`refusals`: why the rules did not take the program (quoted in the prompt)."""
        calls, attempts, current = 0, [], code
        refused = "".join(f"\n- {p.message}" for p in refusals)
        refused = f"\n\nThe rule-based rewrite refused this program:{refused}" if refused else ""
        for stage in STAGES:
            messages = [{"role": "system", "content": SYSTEM},
                        {"role": "user", "content": f"{STAGE_TASK[stage]}\n\nAnalysis of the original program:\n"
                                                    f"{prompt_text(analysis)}{refused}\n\nProgram:\n```cuda\n"
                                                    f"{current}```"}]
            passed = False
            for it in range(1, self.max_iterations + 1):
                answer = self._ask(messages)
                calls += 1
                candidate = extract_code(answer)
                if candidate is None:
                    outcome = CheckOutcome(False, "the reply contains no ```cuda code block")
                    candidate = ""
                else:
                    outcome = self.check(stage, candidate)
                attempts.append(Attempt(stage, it, outcome.ok, outcome.message))
                if outcome.ok:
                    current, passed = candidate, True
                    break
                messages = messages[:2] + [{"role": "assistant", "content": answer},
                                           {"role": "user", "content": judge_prompt(stage, candidate, outcome)}]
            if not passed:
                return LoopResult(current, False, calls, tuple(attempts))
        return LoopResult(current, True, calls, tuple(attempts))
