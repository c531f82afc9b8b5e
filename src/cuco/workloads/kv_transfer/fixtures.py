"""Wrong candidates that verification must reject (the GPU tests run them under delayed arrival)."""

from __future__ import annotations

from cuco.design_space import Directives
from cuco.workloads.kv_transfer.render import render

DIRECT = "lsa/deferred/world/cta/whole"
STAGED = "lsa/split_put_wait/signal/warp/256KiB"
_DIRECT_PUT = "pages_of(pair_buf(ctx, st, BUF_DCACHE), pair_dtab(ctx, st), g, l), g.D, 0, g.nblk,"
_DECODE_WAIT = ("        if ((rc = wait_own(ctx, st, f.arrived(l, c), kThisLaunch, ds))) return rc;  "
                "// chunk c of layer l has landed\n")


def _edit(label: str, anchor: str, replacement: str) -> str:
    code = render(Directives.from_label(label))
    if code.count(anchor) != 1:
        raise AssertionError(f"the {label} template changed: update the kv_transfer fixtures")
    return code.replace(anchor, replacement)


def skipped_block() -> str:
    """Every layer's transfer starts at block 1: block 0's pages stay poison on the decode rank."""
    return _edit(DIRECT, _DIRECT_PUT, _DIRECT_PUT.replace("g.D, 0, g.nblk,", "g.D, 1 /* skips block 0 */, g.nblk,"))


def wrong_page() -> str:
    """After a correct transfer, block 0 of every layer is written again into block 1's page (the decode table read
    one entry late): one block in the wrong page, overwriting a correct one."""
    extra = ("      rc = rc ? rc : cuco_kvt_copy_blocks(pages_of(own(ctx, BUF_PCACHE), ptab(ctx, st), g, l),\n"
             "                                          pages_of(pair_buf(ctx, st, BUF_DCACHE), pair_dtab(ctx, st) + 1,"
             " g, l), g.D, 0, 1, kGroup, 1, cs);  // block 0 into block 1's page\n")
    anchor = "      if (rc) return rc;\n    }"
    return _edit(DIRECT, _DIRECT_PUT, _DIRECT_PUT).replace(anchor, extra + anchor, 1)


def never_waits() -> str:
    """The decode rank scatters each staged chunk without waiting for its arrival flag: it reads the staging area
    before the puts land (poison, or a previous seed's layer), at any W (at W = 1 the decode side has its own
    stream, started with the launch, as a separate decode rank would)."""
    return _edit(STAGED, _DECODE_WAIT, "        // fixture: never waits for chunk c of layer l\n")


FIXTURES = {"skipped block": skipped_block, "wrong page": wrong_page, "never waits": never_waits}
