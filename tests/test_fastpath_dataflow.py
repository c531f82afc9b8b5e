"""Dataflow edges meet buffers by storage class: an alias, a pool offset or a helper's pointer is connected to
the kernel that produced (or consumes) the memory it points into."""

from pathlib import Path

from cuco.fastpath.analyze import analyze_file

CORPUS = Path(__file__).parent / "fixtures" / "host_programs"


def _edges(name):
    return {(e.producer, e.consumer, e.buffer) for e in analyze_file(CORPUS / f"{name}.cu").edges}


def test_pointer_aliases_meet_the_kernels_that_use_the_cache():
    assert _edges("kv_cache_transfer") == {("prefill<<<>>>@L34", "ncclSend@L40", "slot"),
                                           ("ncclRecv@L41", "decode_step<<<>>>@L44", "free_slot")}


def test_offsets_into_one_pool_and_struct_fields_filled_by_a_helper():
    moe = _edges("moe_alltoall_pool")
    assert ("embed<<<>>>@L40", "ncclAlltoAll@L44", "tokens") in moe
    assert ("ncclAlltoAll@L52", "cudaMemcpyAsync@L57", "combined") in moe
    assert _edges("ar_residual_rmsnorm") == {("project<<<>>>@L83", "ncclAllReduce@L84", "buf.partial"),
                                             ("ncclAllReduce@L84", "residual_rmsnorm<<<>>>@L85", "buf.reduced")}
