"""What the machine offers a design space: ranks, nodes, which transports exist, SMs per GPU."""

from __future__ import annotations

import attrs

from cuco.extra_directives import DirectiveError


@attrs.frozen
class Topology:
    """What the machine offers; decides which backends are legal."""

    world: int = attrs.field(default=2, validator=attrs.validators.ge(1))
    nodes: int = attrs.field(default=1, validator=attrs.validators.ge(1))

    @nodes.validator
    def _nodes_le_world(self, _attr: attrs.Attribute, value: int) -> None:
        if value > self.world:
            raise DirectiveError(f"topology has {value} nodes but only {self.world} ranks; nodes must be <= world")
    gin_available: bool | None = None  # None: unknown (legal in the space, the harness reports "unsupported")
    nvshmem_available: bool | None = None
    sm_count: int = 132

    @property
    def gpus_per_node(self) -> int:
        """GPUs on each node (at least 1)."""
        return max(1, self.world // self.nodes)
