"""Value objects of the host-program analysis (what the analyzer finds, with exact line numbers)."""

from __future__ import annotations

from typing import Mapping

import attrs

from cuco.errors import CucoError

#: NCCL host calls the fast path knows, by the kind of rule that rewrites them.
COLLECTIVE_KINDS = {
    "ncclAllGather": "allgather",
    "ncclAlltoAll": "alltoall",
    "ncclReduceScatter": "reducescatter",
    "ncclAllReduce": "allreduce",
    "ncclBroadcast": "broadcast",
    "ncclBcast": "broadcast",
    "ncclReduce": "reduce",
    "ncclSend": "send",
    "ncclRecv": "recv",
}

#: Parameter names of each known call, in NCCL's order.
SIGNATURES = {
    "ncclAllGather": ("sendbuff", "recvbuff", "count", "datatype", "comm", "stream"),
    "ncclAlltoAll": ("sendbuff", "recvbuff", "count", "datatype", "comm", "stream"),
    "ncclReduceScatter": ("sendbuff", "recvbuff", "count", "datatype", "op", "comm", "stream"),
    "ncclAllReduce": ("sendbuff", "recvbuff", "count", "datatype", "op", "comm", "stream"),
    "ncclBroadcast": ("sendbuff", "recvbuff", "count", "datatype", "root", "comm", "stream"),
    "ncclBcast": ("recvbuff", "count", "datatype", "root", "comm", "stream"),
    "ncclReduce": ("sendbuff", "recvbuff", "count", "datatype", "op", "root", "comm", "stream"),
    "ncclSend": ("sendbuff", "count", "datatype", "peer", "comm", "stream"),
    "ncclRecv": ("recvbuff", "count", "datatype", "peer", "comm", "stream"),
}


class FastPathError(CucoError):
    """The fast path cannot take this program; the message names the line and the fix."""


@attrs.frozen
class Span:
    """A byte range of the source (for rewrites)."""

    start: int
    end: int


@attrs.frozen
class Loop:
    """A loop statement of the host program and its line range."""

    kind: str           # for / while / do
    line: int
    end_line: int
    header: str         # e.g. 'for (int it = 0; it < iters; ++it)'


@attrs.frozen
class Collective:
    """One NCCL collective or send/recv call of the host program, with its buffers and where it sits."""

    name: str                       # ncclAllGather, ...
    kind: str                       # allgather, alltoall, reducescatter, allreduce, broadcast, send, recv
    line: int
    end_line: int
    args: Mapping[str, str]         # parameter name -> argument text
    send_buffer: str                # root variable of the send buffer ('' if none)
    recv_buffer: str
    in_place: bool
    comm: str                       # root of the communicator expression
    stream: str
    function: str
    loop: Loop | None
    group: int | None               # index into Analysis.groups
    macro: str                      # wrapping macro, e.g. NCCLCHECK ('' if none)
    name_span: Span = attrs.field(eq=False, repr=False)
    rank_dependent: bool = False    # inside an `if` whose condition mentions the rank
    send_storage: int = -1          # storage class of the send buffer (see provenance.py), -1 if none
    recv_storage: int = -1

    @property
    def where(self) -> str:
        """Short location for messages, e.g. 'ncclAllGather@L42'."""
        return f"{self.name}@L{self.line}"


@attrs.frozen
class Allocation:
    """A device allocation (cudaMalloc, ncclMemAlloc, ...) of the host program."""

    api: str             # cudaMalloc, cudaMallocAsync, cudaMallocManaged, ncclMemAlloc
    variable: str
    size: str
    line: int
    name_span: Span = attrs.field(eq=False, repr=False)
    storage: int = -1    # storage class of `variable`


@attrs.frozen
class Free:
    """A release of device memory (cudaFree, ncclMemFree, ...) in the host program."""

    api: str             # cudaFree, cudaFreeAsync, ncclMemFree
    variable: str
    line: int
    name_span: Span = attrs.field(eq=False, repr=False)
    storage: int = -1


@attrs.frozen
class KernelParam:
    """One parameter of a kernel and how the kernel body uses it."""

    name: str
    type: str
    is_pointer: bool
    is_const: bool
    written: bool        # the kernel body assigns through it
    read: bool           # the kernel body uses it other than as a store target


@attrs.frozen
class KernelDef:
    """A `__global__` kernel defined in the program."""

    name: str
    line: int
    end_line: int
    params: tuple[KernelParam, ...]
    span: Span = attrs.field(eq=False, repr=False)


@attrs.frozen
class KernelLaunch:
    """A `<<<...>>>` kernel launch, with the buffers it reads and writes."""

    kernel: str
    line: int
    grid: str
    block: str
    smem: str
    stream: str
    args: tuple[str, ...]
    reads: tuple[str, ...]          # buffer roots read (by the kernel's parameter const-ness / body)
    writes: tuple[str, ...]
    function: str
    loop: Loop | None
    read_storage: tuple[int, ...] = ()    # storage classes of `reads` / `writes` (provenance.py)
    write_storage: tuple[int, ...] = ()

    @property
    def where(self) -> str:
        """Short location for messages, e.g. 'gemm<<<>>>@L57'."""
        return f"{self.kernel}<<<>>>@L{self.line}"


@attrs.frozen
class SyncPoint:
    """A host synchronisation or ordering call: a stream or device sync, an event record or wait, a cudaMemcpy."""

    api: str             # cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventRecord, cudaStreamWaitEvent, ...
    args: tuple[str, ...]
    line: int
    function: str
    loop: Loop | None
    storage: tuple[int, ...] = ()   # cudaMemcpy*: storage classes of (destination, source)


@attrs.frozen
class GroupSpan:
    """An ncclGroupStart/ncclGroupEnd pair and the collectives inside it."""

    start_line: int
    end_line: int
    members: tuple[int, ...]        # indices into Analysis.collectives
    other_nccl: tuple[str, ...]     # other NCCL calls inside (e.g. ncclCommInitRank): the group stays NCCL's
    start_span: Span = attrs.field(eq=False, repr=False)
    end_span: Span = attrs.field(eq=False, repr=False)


@attrs.frozen
class CommCall:
    """Communicator management: ncclCommInitAll/InitRank (create), ncclCommDestroy/Finalize (end)."""

    api: str
    line: int
    name_span: Span = attrs.field(eq=False, repr=False)


@attrs.frozen
class Edge:
    """Dataflow: `producer` writes `buffer` that `consumer` reads."""

    producer: str
    consumer: str
    buffer: str


@attrs.frozen
class Problem:
    """Something the analysis reports at a line: an error that stops the fast path (fatal) or a note."""

    line: int
    message: str
    fatal: bool = True


@attrs.frozen
class Analysis:
    """Everything the analyzer found in one host program, with exact line numbers."""

    path: str
    form: str                          # 'standalone' or 'candidate_abi'
    lines: int
    collectives: tuple[Collective, ...]
    allocations: tuple[Allocation, ...]
    frees: tuple[Free, ...]
    kernels: tuple[KernelDef, ...]
    launches: tuple[KernelLaunch, ...]
    syncs: tuple[SyncPoint, ...]
    groups: tuple[GroupSpan, ...]
    comm_calls: tuple[CommCall, ...]
    edges: tuple[Edge, ...]
    problems: tuple[Problem, ...]
    include_end: int                   # byte offset after the last top-level #include (prelude goes there)
    abi_functions: Mapping[str, Span] = attrs.field(factory=dict, eq=False, repr=False)  # name -> declarator name span
    launch_body: Span | None = attrs.field(default=None, eq=False, repr=False)            # body of cuco_candidate_launch
    ctx_name: str = "ctx"
    #: how ranks map to processes: single-process (ncclCommInitAll, one process drives every GPU),
    #: thread-per-gpu, process-per-gpu (ncclCommInitRank, the id from a file, the environment or MPI),
    #: candidate-abi (the harness owns the communicator), unknown
    launch_model: str = "unknown"
    storage_names: Mapping[int, tuple[str, ...]] = attrs.field(factory=dict, eq=False, repr=False)
    parameters: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict, eq=False, repr=False)  # function -> names

    @property
    def communicated_buffers(self) -> tuple[str, ...]:
        """The send and receive buffers of the collectives, each once, in order of first use."""
        seen: list[str] = []
        for c in self.collectives:
            for b in (c.send_buffer, c.recv_buffer):
                if b and b not in seen:
                    seen.append(b)
        return tuple(seen)

    @property
    def fatal_problems(self) -> tuple[Problem, ...]:
        """The problems that stop the fast path."""
        return tuple(p for p in self.problems if p.fatal)

    def kinds(self) -> tuple[str, ...]:
        """The kinds of collective the program calls, sorted."""
        return tuple(sorted({c.kind for c in self.collectives}))
