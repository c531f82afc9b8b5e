"""The validity rules every design space applies: each says why a point is illegal and how to fix it."""

from __future__ import annotations

from typing import Callable, Protocol

import attrs

from cuco.directives import WHOLE, Directives
from cuco.topology import Topology


class Space(Protocol):
    """What a rule reads of the space that checks a point (a DesignSpace): the machine and the fused grid."""

    @property
    def topology(self) -> Topology:
        """The machine."""

    @property
    def fused_grid_ctas(self) -> int | None:
        """CTAs a fused kernel launches (None: unknown)."""

    @property
    def max_coresident_ctas(self) -> int | None:
        """CTAs that fit on the GPU at once (None: unknown)."""


Check = Callable[[Directives, Space], "str | None"]


@attrs.frozen
class Rule:
    """A validity rule: `check` returns None when the point is legal, else the reason and the fix."""

    name: str
    check: Check = attrs.field(eq=False, repr=False)


def _lsa_single_node(d: Directives, s: Space) -> str | None:
    if d.backend == "lsa" and s.topology.nodes > 1 and d.sync_scope == "world":
        return (
            "backend=lsa reaches only peers in the LSA team (one NVLink domain) but sync_scope=world spans "
            f"{s.topology.nodes} nodes; use sync_scope=team or backend=gin"
        )
    return None


def _gin_needs_nic(d: Directives, s: Space) -> str | None:
    if d.backend == "gin" and s.topology.gin_available is False:
        return "backend=gin needs an RDMA NIC and none was detected here; use backend=lsa on one node"
    return None


def _nvshmem_present(d: Directives, s: Space) -> str | None:
    if d.backend == "nvshmem" and s.topology.nvshmem_available is False:
        return "backend=nvshmem needs the NVSHMEM library; install the cu12/cu13 extra or pick backend=lsa"
    return None


def _deferred_whole(d: Directives, s: Space) -> str | None:
    if d.placement == "deferred" and d.chunk_bytes != WHOLE:
        return (
            "placement=deferred issues communication after all compute, so chunking has nothing to overlap; "
            "use chunk_bytes=0 (whole) or another placement"
        )
    return None


def _fused_coresident(d: Directives, s: Space) -> str | None:
    if d.placement != "fused" or s.fused_grid_ctas is None or s.max_coresident_ctas is None:
        return None
    if s.fused_grid_ctas > s.max_coresident_ctas:
        return (
            f"placement=fused launches {s.fused_grid_ctas} CTAs but only {s.max_coresident_ctas} can be "
            "co-resident; in-kernel waits on peers would deadlock. Shrink the fused grid or pick another placement"
        )
    return None


def _fused_thread_issuer(d: Directives, s: Space) -> str | None:
    if d.placement == "fused" and d.issuer == "thread":
        return (
            "placement=fused with issuer=thread makes every compute thread a communication issuer and serialises "
            "tiles on transfers; use issuer=warp (warp-specialised) or cta"
        )
    return None


def _signal_needs_chunks(d: Directives, s: Space) -> str | None:
    if d.sync_scope == "signal" and d.chunk_bytes == WHOLE and d.placement != "fused":
        return (
            "sync_scope=signal uses one flag per chunk; with chunk_bytes=whole it is a single flag and no "
            "different from a barrier. Pick a chunk size or sync_scope=world/team/block"
        )
    return None


def _copy_engine_transport(d: Directives, s: Space) -> str | None:
    if d.issuer != "copy_engine":
        return None
    if d.backend == "gin":
        return ("issuer=copy_engine copies between NVLink-mapped buffers, but backend=gin moves data through the "
                "NIC; use issuer=thread/warp/cta with gin, or backend=lsa")
    if d.placement == "fused":
        return ("placement=fused issues transfers from inside the compute kernel, which a copy engine cannot do; "
                "use issuer=warp or cta with fused, or another placement")
    return None


DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("lsa-single-node", _lsa_single_node),
    Rule("gin-needs-nic", _gin_needs_nic),
    Rule("nvshmem-present", _nvshmem_present),
    Rule("deferred-whole-buffer", _deferred_whole),
    Rule("fused-co-resident", _fused_coresident),
    Rule("fused-no-thread-issuer", _fused_thread_issuer),
    Rule("signal-needs-chunks", _signal_needs_chunks),
    Rule("copy-engine-transport", _copy_engine_transport),
)
