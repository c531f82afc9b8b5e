"""Pieces every workload's design space repeats: the backends a topology offers, LSA's one-node rule and the
subset of directives a backend is rendered for."""

from __future__ import annotations

from typing import Sequence

from cuco.design_space import DesignSpace, Directives, Rule, Topology


def backends_for(topology: Topology, offered: Sequence[str]) -> tuple[str, ...]:
    """The workload's `offered` backends that `topology` can run: no GIN where it has no NIC, no NVSHMEM where the
    library is absent, no LSA across nodes (GIN then, even unconfirmed)."""
    backends = tuple(b for b in offered if not (b == "gin" and topology.gin_available is False)
                     and not (b == "nvshmem" and topology.nvshmem_available is False))
    if topology.nodes > 1:
        backends = tuple(b for b in backends if b != "lsa") or ("gin",)
    return backends


def lsa_one_node(name: str, how: str) -> Rule:
    """A rule named `name` refusing backend=lsa on a topology of several nodes; `how` says what the workload does by
    NVLink load/store (e.g. 'writes the decode pages by NVLink stores')."""

    def check(d: Directives, s: DesignSpace) -> str | None:
        if d.backend == "lsa" and s.topology.nodes > 1:
            return (f"backend=lsa {how}, so all ranks must share one node (this topology has {s.topology.nodes} "
                    "nodes); use backend=gin")
        return None

    return Rule(name, check)


def backend_subset(name: str, backend: str, why: str, **allowed: Sequence) -> Rule:
    """A rule named `name` refusing backend=`backend` unless every directive named in `allowed` takes one of its
    values there; `why` is the refusal (what the backend is rendered for, and the fix)."""

    def check(d: Directives, _s: DesignSpace) -> str | None:
        if d.backend == backend and any(d.get(k) not in values for k, values in allowed.items()):
            return why
        return None

    return Rule(name, check)
