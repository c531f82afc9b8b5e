"""Rule-based rewrites: which host NCCL call becomes which device-initiated LSA kernel, and when a rule
does not apply (then the LLM loop, if any, takes over).

Every rule works at the fast path's conservative point (deferred / world barrier / cta issuer / whole
buffer): the host call is replaced, on the same stream and with the same arguments, by a launch of one
LSA kernel (cucoAllGather -> cucofp::allgatherKernel, ...); the kernels live in `cuda/lsa_kernels.cuh`. A
program's other design points (cuco.program.space) keep these rewrites and change the runtime beneath them:
signal flags (`cuda/lsa_signal.cuh`) and copy engines (`cuda/lsa_copy.cuh`) for AllGather, AlltoAll, Broadcast.
"""

from __future__ import annotations

import re

import attrs

from cuco.design_space import WHOLE, Directives
from cuco.fastpath.model import Analysis, Collective, Problem

#: The design point every rule produces.
CONSERVATIVE = Directives("lsa", "deferred", "world", "cta", WHOLE)

_FP8 = re.compile(r"ncclFloat8|ncclFp8|e4m3|e5m2", re.I)
_OPS = ("ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg")


@attrs.frozen
class Rule:
    """One rewrite: the NCCL kinds it covers, the replacement call and the device kernel behind it."""

    name: str
    kinds: tuple[str, ...]
    replacement: dict = attrs.field(eq=False)     # NCCL name -> replacement host call
    kernel: str
    summary: str


RULES: tuple[Rule, ...] = (
    Rule("lsa-allgather-pull", ("allgather",), {"ncclAllGather": "cucoAllGather"}, "cucofp::allgatherKernel<Sync>",
         "each rank pulls every peer's send buffer through ncclGetLsaPointer into recv[p*count]"),
    Rule("lsa-alltoall-pull", ("alltoall",), {"ncclAlltoAll": "cucoAlltoAll"}, "cucofp::alltoallKernel<Sync>",
         "padded AlltoAll: rank r pulls block r of every peer's send buffer into recv[p*count]"),
    Rule("lsa-reducescatter-pull", ("reducescatter",), {"ncclReduceScatter": "cucoReduceScatter"},
         "cucofp::reducescatterKernel<T>", "rank r reduces slice r of all peers' send buffers (fp32 accumulation "
         "for half/bf16)"),
    Rule("lsa-allreduce-rs-ag", ("allreduce",), {"ncclAllReduce": "cucoAllReduce"}, "cucofp::allreduceKernel<T>",
         "each rank reduces its slice of all send buffers and stores the sums into every rank's recv (one pass "
         "between two barriers; from W = 3 and 32 MiB: into its own recv, a barrier, then gathers the other "
         "slices); safe in place"),
    Rule("lsa-broadcast-pull", ("broadcast",), {"ncclBroadcast": "cucoBroadcast", "ncclBcast": "cucoBcast"},
         "cucofp::broadcastKernel<Sync>", "the root stages into its recv buffer, every rank pulls it"),
    Rule("lsa-reduce-slices", ("reduce",), {"ncclReduce": "cucoReduce"}, "cucofp::reduceRootKernel<T>",
         "the ranks after the root (both ranks at W = 2) each reduce a slice of all send buffers into the root's "
         "recv buffer by remote stores, one buffer into the root (fp32 accumulation for half/bf16)"),
    Rule("lsa-p2p-mailbox", ("send", "recv"), {"ncclSend": "cucoSend", "ncclRecv": "cucoRecv"},
         "cucofp::p2pKernel", "sends/receives (pairs, rings, pipelines, AlltoAllv): senders post descriptors into "
         "the receivers' symmetric mailboxes, receivers pull and acknowledge; pairwise, no barrier, so ranks may "
         "issue them under rank-dependent conditions; one kernel per group and communicator"),
)

#: Replacements of the calls around collectives.
GROUP_CALLS = {"ncclGroupStart": "cucoGroupStart", "ncclGroupEnd": "cucoGroupEnd"}
COMM_END_CALLS = {"ncclCommDestroy": "cucoCommDestroy", "ncclCommFinalize": "cucoCommFinalize"}
#: Communicator creation, recorded so that symmetric windows can be set up before a timed region starts.
COMM_INIT_CALLS = {"ncclCommInitRank": "cucoCommInitRank", "ncclCommInitAll": "cucoCommInitAll",
                   "ncclCommInitRankConfig": "cucoCommInitRankConfig"}
ALLOC_CALLS = {"cudaMalloc": "cucoSymAlloc", "ncclMemAlloc": "cucoSymAllocNccl", "cudaMallocAsync": "cucoSymAllocAsync"}
FREE_CALLS = {"cudaFree": "cucoSymFree", "ncclMemFree": "cucoSymFreeNccl", "cudaFreeAsync": "cucoSymFreeAsync"}
#: Why an allocation API cannot become symmetric memory.
UNSUPPORTED_ALLOC = {"cudaMallocManaged": "managed memory cannot be registered as an NCCL window; allocate it with "
                                          "cudaMalloc"}


def rule_for(c: Collective) -> Rule | None:
    """The rule that rewrites collective `c`, or None when no rule covers its kind."""
    return next((r for r in RULES if c.kind in r.kinds), None)


def check_collective(c: Collective, a: Analysis) -> str | None:
    """None when a rule applies to `c`, else why not (with the line)."""
    rule = rule_for(c)
    if rule is None:
        return f"line {c.line}: {c.name} has no fast-path rule"
    dtype = c.args.get("datatype", "")
    if _FP8.search(dtype) and c.kind in ("reducescatter", "allreduce", "reduce"):
        return f"line {c.line}: {c.name} reduces an fp8 type ({dtype}); the LSA rules reduce only standard types"
    op = c.args.get("op")
    if op is not None and op.strip() not in _OPS and ("PreMulSum" in op or re.match(r"^-?\d+$", op.strip())):
        return f"line {c.line}: {c.name} uses a custom reduction operator `{op}`; only sum/prod/max/min/avg have rules"
    return None


def applicable(a: Analysis) -> tuple[list[str], list[Problem]]:
    """Names of the rules to apply (with lines), and the problems that block the rule-based path."""
    applied: list[str] = []
    problems: list[Problem] = []
    for c in a.collectives:
        reason = check_collective(c, a)
        if reason:
            problems.append(Problem(c.line, reason))
            continue
        rule = rule_for(c)
        assert rule is not None
        applied.append(f"{rule.name}@L{c.line}")
    for g in a.groups:
        if g.members and g.other_nccl:
            problems.append(Problem(g.start_line, f"lines {g.start_line}-{g.end_line}: an NCCL group mixes "
                                    f"collectives with {', '.join(g.other_nccl)}; split it into separate groups"))
    return applied, problems
