"""The design space of a user's program and the rendering of a point: the fast path's rewrite of every
recognised collective, parameterised by the point (macros read by cuco/fastpath/cuda/lsa_point.cuh).

- placement: `deferred` (each communication kernel where the NCCL call was, on the caller's stream) or
  `stream_overlap` (on a side stream; the caller's stream waits at the `cucoJoin()` the transform places before
  the first statement that depends on the transfer, so independent kernels in between run beside it);
- sync_scope: `world` (LSA barriers before and after every collective) or `signal` (AllGather, AlltoAll and
  Broadcast wait only for the peers they read and are read by: per-peer ready/done flags in the mailbox, with
  the collective's sequence number so repeated calls never mix epochs);
- issuer: `cta` (kernels move the bytes) or `copy_engine` (AllGather, AlltoAll and Broadcast move their bytes
  by cudaMemcpyAsync between LSA-mapped buffers, between an entry and an exit kernel of one CTA that keep the
  ordering of `sync_scope`; no SM moves data);
- chunk_bytes: `whole` or, with issuer=copy_engine only, 4 MiB / 1 MiB: each copy is cut into chunks spread over
  4 copy streams, so several copy engines and NVLink peers work at once (the CTA kernels move whole buffers);
- comm_ctas (extra directive): CTAs per communication kernel; fewer leave SMs to overlapping compute, more keep
  more loads and stores in flight (measured at W = 4: AllReduce and ReduceScatter from 4 MiB up gain 4-20 % at 64
  and 128 CTAs, the calls of 1 MiB and less do not, benchmarks/results/reductions/w4_ctas.md); every CTA of a
  communication kernel waits for its peers' and must run at once, so at most the topology's SMs;
- allreduce (extra directive, programs that call AllReduce): `auto` (`push` where it applies, else one shot up to
  8 MiB at W = 2 and 256 KiB above, else two shot: the fastest measured kernel at every size), `one_shot` (every
  rank reduces the whole buffer from every rank's send: two barriers, no gather pass; W - 1 buffers read per rank)
  or `two_shot` (reduce-scatter then all-gather: three barriers, 2 (W - 1) / W buffers read); in-place calls are
  two shot unless pushed (a one-shot rank would overwrite what its peers still read); or `push` (each rank stores
  its buffer into a staging slot of every peer and raises one flag per CTA there; the receiver reduces locally:
  no barrier, one one-way signal; float, half and bfloat16 buffers of up to 4 MiB / W, in place too; other ones
  as `auto`).
- reducescatter (extra directive, programs that call ReduceScatter): `auto` (`push` where it applies, else
  `barrier`), `barrier` (each rank reduces its slice from every rank's send between two barriers) or `push`
  (slice p of each rank's send stored into rank p, one flag per CTA, the slice reduced locally; float, half and
  bfloat16 slices of up to 4 MiB / W, other ones with barriers).

Reductions (AllReduce, Reduce, ReduceScatter) stay on SM kernels with barriers (or the push kernel's flags), and
sends/receives on their pairwise mailbox kernel, under every issuer and sync scope. So sync_scope=signal and
issuer=copy_engine are offered only to programs that call AllGather, AlltoAll or Broadcast, and a program whose
every collective is one of those keeps comm_ctas at its first value under copy_engine (no CTA kernel of it would
change). Backend lsa.
"""

from __future__ import annotations

from cuco.design_space import DEFAULT_RULES, MiB, WHOLE, DesignSpace, Directives, Rule, Topology
from cuco.extra_directives import ExtraDirective
from cuco.fastpath import annotate
from cuco.fastpath.model import Analysis
from cuco.fastpath.transform import PRELUDE_BEGIN, transform

COMM_CTAS = ExtraDirective("comm_ctas", ("32", "16", "8", "64", "128"),
                           "CTAs per communication kernel; fewer leave SMs to compute that overlaps it, more issue "
                           "more loads and stores at once (large reductions); at most one per SM")
ALLREDUCE = ExtraDirective("allreduce", ("auto", "one_shot", "two_shot", "push"),
                            "AllReduce algorithm: one_shot reduces the whole buffer from every rank's send (two "
                            "barriers, more bytes read at W > 2), two_shot reduce-scatters then all-gathers (three "
                            "barriers); auto: push where it applies, else one shot up to 8 MiB at W = 2 and 256 KiB "
                            "above, else two shot; in-place calls are two shot unless pushed; "
                            "push stores each rank's buffer into every peer and signals once, no barrier (float, "
                            "half and bfloat16 buffers of up to 4 MiB / W, in place too; other ones as auto)")
_ALLREDUCE = {"auto": 0, "one_shot": 1, "two_shot": 2, "push": 3}
REDUCESCATTER = ExtraDirective("reducescatter", ("auto", "barrier", "push"),
                               "ReduceScatter algorithm: auto pushes where push applies, else barrier; barrier "
                               "reduces each rank's slice from every rank's send between two barriers; push stores slice p of each rank's send into rank p and "
                               "signals once, no barrier (float, half and bfloat16 slices of up to 4 MiB / W; "
                               "other ones with barriers)")
_REDUCESCATTER = {"auto": 0, "barrier": 1, "push": 2}
#: The collectives whose bytes the copy engines can move and that signals can order.
MOVEMENT = ("allgather", "alltoall", "broadcast")
CHUNK_SIZES = (WHOLE, 4 * MiB, 1 * MiB)
#: What the directives mean in a program's rewrite (the space's generic meanings are the workloads').
MEANINGS = ("In this program's design space: sync_scope=signal orders AllGather, AlltoAll and Broadcast by "
            "per-peer ready/done flags instead of barriers; issuer=copy_engine moves their bytes with "
            "cudaMemcpyAsync between LSA-mapped buffers between one-CTA entry and exit kernels; chunk_bytes (copy "
            "engines only) cuts each copy into chunks over 4 copy streams; reductions and sends/receives stay on "
            "SM kernels with their own ordering. The macros are in the `point` EVOLVE block.")
_PLACEMENT = {"deferred": 0, "stream_overlap": 1}
_SYNC_SCOPE = {"world": 0, "signal": 1}
_ISSUER = {"cta": 0, "copy_engine": 1}
#: Not rules here: chunks split copies over copy streams rather than overlapping compute, and signals are
#: per peer, not per chunk.
_DROPPED = ("deferred-whole-buffer", "signal-needs-chunks")


def _chunks_need_copy_engine(d: Directives, _s: DesignSpace) -> str | None:
    if d.chunk_bytes != WHOLE and d.issuer != "copy_engine":
        return ("chunk_bytes cuts copy-engine transfers into chunks over copy streams; the CTA kernels move whole "
                "buffers. Use chunk_bytes=whole, or issuer=copy_engine")
    return None


def _comm_ctas_rule(kinds: tuple[str, ...]) -> Rule:
    def check(d: Directives, _s: DesignSpace) -> str | None:
        if (d.issuer == "copy_engine" and kinds and set(kinds) <= set(MOVEMENT)
                and d.get("comm_ctas") != COMM_CTAS.default):
            return (f"with issuer=copy_engine no kernel of this program moves data by CTAs (it calls only "
                    f"{', '.join(kinds)}), so comm_ctas changes nothing; keep comm_ctas={COMM_CTAS.default}")
        return None

    return Rule("program-comm-ctas-unused", check)


def _comm_ctas_fit(d: Directives, s: DesignSpace) -> str | None:
    ctas = int(d.get("comm_ctas"))
    if ctas > s.topology.sm_count:
        return (f"comm_ctas={ctas} is more than the GPU's {s.topology.sm_count} SMs; the CTAs of a communication "
                f"kernel wait for their peers' and must all run at once: use comm_ctas <= {s.topology.sm_count}")
    return None


def program_space(topology: Topology, kinds: tuple[str, ...] = ()) -> DesignSpace:
    """The legal points for a program calling collectives of `kinds` (Analysis.kinds()) at `topology` (one
    node: LSA). Without a movement collective the space is placement x comm_ctas."""
    movement = any(k in MOVEMENT for k in kinds)
    extras = [COMM_CTAS]
    if "allreduce" in kinds:
        extras.append(ALLREDUCE)
    if "reducescatter" in kinds:
        extras.append(REDUCESCATTER)
    rules = tuple(r for r in DEFAULT_RULES if r.name not in _DROPPED)
    rules += (Rule("program-chunks-need-copy-engine", _chunks_need_copy_engine), _comm_ctas_rule(tuple(kinds)),
              Rule("program-comm-ctas-fit", _comm_ctas_fit))
    return DesignSpace(backends=("lsa",), placements=tuple(_PLACEMENT),
                       sync_scopes=tuple(_SYNC_SCOPE) if movement else ("world",),
                       issuers=tuple(_ISSUER) if movement else ("cta",),
                       chunk_sizes=CHUNK_SIZES if movement else (WHOLE,),
                       topology=topology, rules=rules,
                       extras=tuple(extras))


def point_block(point: Directives) -> str:
    """The point's macros as an EVOLVE block (what a search may change), read by the fast path's runtime."""
    body = (f"// cuco design point: {point.label()}\n"
            f"#define CUCOFP_PLACEMENT {_PLACEMENT[point.placement]}  // {point.placement}\n"
            f"#define CUCOFP_COMM_CTAS {int(point.get('comm_ctas'))}\n"
            f"#define CUCOFP_SYNC_SCOPE {_SYNC_SCOPE[point.sync_scope]}  // {point.sync_scope}\n"
            f"#define CUCOFP_ISSUER {_ISSUER[point.issuer]}  // {point.issuer}\n"
            f"#define CUCOFP_CHUNK_BYTES {point.chunk_bytes}  // {point.label().split('/')[4]}\n")
    algo = dict(point.extra).get("allreduce")
    if algo is not None:
        body += f"#define CUCOFP_ALLREDUCE {_ALLREDUCE[algo]}  // {algo}\n"
    scatter = dict(point.extra).get("reducescatter")
    if scatter is not None:
        body += f"#define CUCOFP_REDUCESCATTER {_REDUCESCATTER[scatter]}  // {scatter}\n"
    return annotate.wrap(body, "point")


#: Where the point block goes in a memoised rewrite (every point's rewrite differs only there).
_SLOT = "// cuco: design point block slot 6f1c2a\n"
_REWRITES: dict[str, str] = {}


def render(observed: str, analysis: Analysis, point: Directives) -> str:
    """The observed program rewritten onto the GPU at `point` (`analysis` is the analysis of `observed`)."""
    code = _REWRITES.get(observed)
    if code is None:
        code = transform(analysis, observed, point_block=_SLOT).code
        if len(_REWRITES) >= 8:
            _REWRITES.pop(next(iter(_REWRITES)))
        _REWRITES[observed] = code
    return code.replace(_SLOT + PRELUDE_BEGIN, point_block(point) + PRELUDE_BEGIN, 1)
