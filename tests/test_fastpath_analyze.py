"""Analyzer on host programs with different collectives, streams/events, loops, in-place calls and macros."""

from pathlib import Path

import pytest

from cuco.fastpath.analyze import analyze, analyze_file
from cuco.fastpath.model import FastPathError
from cuco.fastpath.render import prompt_text, render_report

FIX = Path(__file__).parent / "fixtures" / "fastpath"


def test_allgather_two_streams_with_events():
    a = analyze_file(FIX / "ag_two_streams.cu")
    assert a.form == "standalone"
    (c,) = a.collectives
    assert (c.name, c.line, c.macro, c.group, c.comm, c.stream) == ("ncclAllGather", 47, "NCCLCHECK", 0, "comms", "comm[r]")
    assert (c.send_buffer, c.recv_buffer, c.in_place) == ("send", "recv", False)
    assert c.args["count"] == "n" and c.args["datatype"] == "ncclFloat"
    assert c.loop is not None and c.loop.line == 46 and c.loop.header.startswith("for (int r")
    assert [(x.api, x.variable, x.line) for x in a.allocations] == [
        ("cudaMalloc", "send", 29), ("cudaMalloc", "recv", 30), ("cudaMalloc", "acc", 31)]
    produce, consume = a.launches
    assert (produce.kernel, produce.grid, produce.block, produce.stream) == ("produce", "64", "256", "compute[r]")
    assert produce.writes == ("send",) and produce.reads == ()
    assert consume.reads == ("recv", "acc") and consume.writes == ("acc",)  # `acc[i] +=` reads too
    apis = [(s.api, s.line) for s in a.syncs]
    assert ("cudaEventRecord", 42) in apis and ("cudaStreamWaitEvent", 43) in apis
    assert ("cudaStreamWaitEvent", 52) in apis and ("cudaStreamSynchronize", 58) in apis
    edges = {(e.producer, e.consumer, e.buffer) for e in a.edges}
    assert ("produce<<<>>>@L41", "ncclAllGather@L47", "send") in edges
    assert ("ncclAllGather@L47", "consume<<<>>>@L53", "recv") in edges
    consts = {p.name: p.is_const for k in a.kernels for p in k.params if p.is_pointer}
    assert consts == {"x": False, "gathered": True, "acc": False}


def test_alltoall_allreduce_in_place_and_reducescatter():
    a = analyze_file(FIX / "alltoall_reduce.cu")
    kinds = [(c.kind, c.line, c.in_place) for c in a.collectives]
    assert kinds == [("alltoall", 38, False), ("allreduce", 45, True), ("reducescatter", 48, False)]
    assert a.collectives[1].args["op"] == "ncclSum" and a.collectives[2].args["op"] == "ncclMax"
    assert all(c.loop is not None for c in a.collectives)  # inside `for (int r ...)` inside `for (step ...)`
    assert [g.members for g in a.groups] == [(0,), (1,), (2,)]
    edges = {(e.producer, e.consumer) for e in a.edges}
    assert ("square_plus<<<>>>@L42", "ncclAllReduce@L45") in edges
    assert ("ncclAllReduce@L45", "ncclReduceScatter@L48") in edges


def test_ring_of_send_recv_and_broadcasts():
    a = analyze_file(FIX / "ring_threads.cu")
    names = [(c.name, c.line) for c in a.collectives]
    assert names == [("ncclSend", 34), ("ncclRecv", 35), ("ncclBroadcast", 40), ("ncclBcast", 41)]
    send, recv, bc, bcast = a.collectives
    assert send.args["peer"] == "next" and recv.args["peer"] == "prev"
    assert send.group == recv.group == 0 and bc.group is None
    assert bcast.in_place and bcast.recv_buffer == "acc" and bc.args["root"] == "0"
    assert send.loop is not None and send.loop.header.startswith("for (int step")
    assert send.function == "worker"


def test_alltoallv_group_over_loops():
    a = analyze_file(FIX / "alltoallv_p2p.cu")
    (g,) = a.groups
    assert (g.start_line, g.end_line, g.members, g.other_nccl) == (35, 46, (0, 1), ())
    assert a.collectives[0].send_buffer == "sendbuf" and a.collectives[0].args["sendbuff"] == "sendbuf[r] + soff"


def test_candidate_abi_form():
    a = analyze_file(FIX / "abi_allgather_seed.cu")
    assert a.form == "candidate_abi"
    (c,) = a.collectives
    assert (c.send_buffer, c.recv_buffer, c.comm, c.stream) == ("ctx->buffers[0]", "ctx->buffers[1]", "ctx->comm",
                                                                "ctx->stream")
    assert set(a.abi_functions) == {"cuco_candidate_requirements", "cuco_candidate_launch"}


def test_problems_reported_with_lines():
    unknown = analyze_file(FIX / "bad_unknown_collective.cu")
    assert [p.line for p in unknown.problems] == [9] and "ncclGather" in unknown.problems[0].message
    untraced = analyze_file(FIX / "bad_untraced_comm.cu")
    assert untraced.problems[0].line == 8 and "communicator" in untraced.problems[0].message
    assert analyze_file(FIX / "bad_no_nccl.cu").collectives == ()


def test_not_cuda_is_rejected():
    with pytest.raises(FastPathError, match="does not parse"):
        analyze_file(FIX / "bad_not_cuda.txt")
    with pytest.raises(FastPathError, match="not a text file"):
        bin_path = Path(__file__).with_name("_binary_fixture.bin")
        bin_path.write_bytes(b"\xff\xfe\x00\x81")
        try:
            analyze_file(bin_path)
        finally:
            bin_path.unlink()


def test_rank_dependent_p2p_flag():
    code = """#include <nccl.h>
void f(ncclComm_t comm, int rank, float* a, cudaStream_t s) {
  if (rank == 0) ncclSend(a, 4, ncclFloat, 1, comm, s);
  else ncclRecv(a, 4, ncclFloat, 0, comm, s);
}"""
    a = analyze(code)
    assert all(c.rank_dependent for c in a.collectives)


def test_report_and_prompt_text():
    a = analyze_file(FIX / "ag_two_streams.cu")
    rep = render_report(a)
    assert "L47 ncclAllGather(sendbuff=send[r]" in rep and "via NCCLCHECK" in rep
    assert "produce<<<>>>@L41 -> ncclAllGather@L47 via `send`" in rep
    txt = prompt_text(a)
    assert "line 47: ncclAllGather send=send recv=recv" in txt
