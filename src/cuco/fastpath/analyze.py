"""Analyze a host-driven CUDA+NCCL program: collectives, allocations, kernels, launches, synchronisation,
groups and the dataflow between kernels and collectives, all with exact line numbers."""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import tree_sitter

from cuco.fastpath import parse as P
from cuco.fastpath.dataflow import dataflow_edges
from cuco.fastpath.provenance import Storage, storage_classes
from cuco.fastpath.model import (
    COLLECTIVE_KINDS, SIGNATURES, Allocation, Analysis, Collective, CommCall, FastPathError, Free,
    GroupSpan, KernelDef, KernelLaunch, KernelParam, Loop, Problem, Span, SyncPoint,
)

ALLOC_APIS = ("cudaMalloc", "cudaMallocAsync", "cudaMallocManaged", "ncclMemAlloc")
FREE_APIS = ("cudaFree", "cudaFreeAsync", "ncclMemFree")
SYNC_APIS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventRecord", "cudaStreamWaitEvent",
             "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpyAsync")
COMM_APIS = ("ncclCommInitAll", "ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitRankScalable", "ncclCommSplit",
             "cucoCommInitAll", "cucoCommInitRank", "cucoCommInitRankConfig",
             "ncclCommDestroy", "ncclCommFinalize", "ncclCommAbort")
#: NCCL calls that move data but have no rule (the LLM loop may still handle them).
UNKNOWN_COLLECTIVE = re.compile(r"^nccl(Gather|Scatter|PutSignal|Signal|WaitSignal|AllToAllv|AlltoAllv|\w+Config)$")
_THREADS = re.compile(r"std::j?thread\b|pthread_create|std::async\b|#\s*pragma\s+omp\s+parallel")
_LOOPS = ("for_statement", "for_range_loop", "while_statement", "do_statement")


def _loop(src: P.Source, node: tree_sitter.Node) -> Loop | None:
    lp = P.enclosing(node, _LOOPS)
    if lp is None:
        return None
    body = lp.child_by_field_name("body")
    head_end = body.start_byte if body is not None else lp.end_byte
    header = src.data[lp.start_byte:head_end].decode("utf-8", "replace").strip()
    kind = {"for_statement": "for", "for_range_loop": "for", "while_statement": "while"}.get(lp.type, "do")
    return Loop(kind, P.line_of(lp), lp.end_point[0] + 1, " ".join(header.split()))


def _function(src: P.Source, node: tree_sitter.Node) -> str:
    return P.function_name(src, P.enclosing(node, ("function_definition",)))


def _span(node: tree_sitter.Node) -> Span:
    return Span(node.start_byte, node.end_byte)


def _name_node(call: tree_sitter.Node) -> tree_sitter.Node:
    fn = call.child_by_field_name("function")
    return fn.child_by_field_name("name") if fn is not None and fn.type == "template_function" else fn


def _macro(src: P.Source, call: tree_sitter.Node) -> str:
    """The macro (or checker function) wrapping a call, e.g. NCCLCHECK(ncclAllGather(...))."""
    parent = call.parent
    if parent is not None and parent.type == "argument_list" and parent.parent is not None:
        return P.callee_name(src, parent.parent)
    return ""


def _rank_dependent(src: P.Source, call: tree_sitter.Node) -> bool:
    for a in P.ancestors(call):
        if a.type in ("if_statement", "conditional_expression"):
            cond = a.child_by_field_name("condition")
            if cond is not None and re.search(r"\brank\b|\bmyRank\b|\bme\b|->rank\b", src.node_text(cond)):
                return True
    return False


def _declared_comms(src: P.Source) -> set[str]:
    """Names declared with a type mentioning ncclComm_t (variables, parameters, fields, containers)."""
    names: set[str] = set()
    for n in P.walk(src.root):
        if n.type not in ("declaration", "parameter_declaration", "field_declaration"):
            continue
        typ = n.child_by_field_name("type")
        if typ is None or "ncclComm_t" not in src.node_text(typ):
            continue
        for d in n.children_by_field_name("declarator"):
            while d is not None and d.type not in ("identifier", "field_identifier"):
                d = d.child_by_field_name("declarator") or (d.named_children[0] if d.named_children else None)
            if d is not None:
                names.add(src.node_text(d))
    return names


def _kernels(src: P.Source) -> list[KernelDef]:
    out = []
    for n in P.walk(src.root):
        if n.type != "function_definition":
            continue
        if not src.is_kernel(n):
            continue
        body = n.child_by_field_name("body")
        body_text = src.node_text(body)
        decl = n.child_by_field_name("declarator")
        while decl is not None and decl.type != "function_declarator":
            decl = decl.child_by_field_name("declarator")
        params = []
        plist = decl.child_by_field_name("parameters") if decl is not None else None
        for p in (plist.named_children if plist is not None else []):
            if p.type != "parameter_declaration":
                continue
            text = src.node_text(p)
            d = p.child_by_field_name("declarator")
            name_node = d
            while name_node is not None and name_node.type != "identifier":
                name_node = name_node.child_by_field_name("declarator") or (
                    name_node.named_children[-1] if name_node.named_children else None)
            name = src.node_text(name_node) if name_node is not None else ""
            pointer = d is not None and d.type == "pointer_declarator"
            const = pointer and text.split("*")[0].find("const") >= 0
            uses = len(re.findall(rf"(?<![.\w>]){re.escape(name)}\b", body_text)) if name else 0
            target = rf"(?:(?<![.\w>]){re.escape(name)}\s*\[[^\]]*\]|\*\s*\(?\s*{re.escape(name)}\b[^=;]*?)\s*"
            stores = len(re.findall(target + r"(?:[+\-*/|&^]?=)(?!=)", body_text)) if name else 0
            updates = len(re.findall(target + r"[+\-*/|&^]=", body_text)) if name else 0
            params.append(KernelParam(name, text, pointer, const, stores > 0, uses > stores or updates > 0))
        out.append(KernelDef(P.function_name(src, n), P.line_of(n), n.end_point[0] + 1, tuple(params), _span(n)))
    return out


def _launch(src: P.Source, inner: tree_sitter.Node, kernels: dict[str, KernelDef], storage: Storage) -> KernelLaunch:
    outer = inner.parent
    cfg = [src.node_text(a) for a in P.call_args(inner)] + ["", "", "", ""]
    name = src.node_text(inner.child_by_field_name("function")).split("<")[0].strip()
    args = P.call_args(outer) if outer is not None and outer.type == "call_expression" else []
    arg_text = tuple(src.node_text(a) for a in args)
    roots = [P.root_identifier(src, a) for a in args]
    reads: list[str] = []
    writes: list[str] = []
    k = kernels.get(name)
    for i, root in enumerate(roots):
        if not root:
            continue
        if k is not None and i < len(k.params):
            prm = k.params[i]
            if prm.is_pointer and prm.read:
                reads.append(root)
            if prm.is_pointer and prm.written:
                writes.append(root)
        else:  # kernel defined elsewhere: assume it reads and writes every argument
            reads.append(root)
            writes.append(root)
    reads, writes, fn = list(dict.fromkeys(reads)), list(dict.fromkeys(writes)), _function(src, inner)
    return KernelLaunch(name, P.line_of(inner), cfg[0], cfg[1], cfg[2], cfg[3], arg_text, tuple(reads), tuple(writes),
                        fn, _loop(src, inner), tuple(storage.of(fn, r) for r in reads),
                        tuple(storage.of(fn, w) for w in writes))


def _include_end(src: P.Source) -> int:
    """Byte offset just after the last top-level #include (0 if none)."""
    ends = [n.end_byte for n in src.root.named_children if n.type == "preproc_include"]
    return max(ends) if ends else 0


def analyze(text: str, path: str = "<memory>") -> Analysis:
    """Analyze program text; raises FastPathError when the text is not a C++/CUDA program at all."""
    src = P.parse(text)
    if not src.root.named_children or (src.root.has_error and not any(
            n.type == "function_definition" for n in src.root.named_children)):
        errs = P.syntax_errors(src)
        where = ", ".join(f"line {ln}: {snip!r}" for ln, snip in errs[:3])
        raise FastPathError(f"{path} does not parse as CUDA C++ ({where or 'no function definitions'}); "
                            "give a .cu/.cpp host program")
    kernels = _kernels(src)
    kmap = {k.name: k for k in kernels}
    comms = _declared_comms(src)
    storage = storage_classes(src)
    colls: list[tuple[Collective, tree_sitter.Node]] = []
    allocs, frees, launches, syncs, comm_calls, problems = [], [], [], [], [], []
    group_marks: list[tuple[str, tree_sitter.Node]] = []
    nccl_calls: list[tuple[str, tree_sitter.Node]] = []
    for n in P.walk(src.root):
        if n.type != "call_expression":
            continue
        if src.is_launch(n):
            launches.append(_launch(src, n, kmap, storage))
            continue
        name = P.callee_name(src, n)
        args = P.call_args(n)
        line = P.line_of(n)
        if name.startswith("nccl"):
            nccl_calls.append((name, n))
        if name in COLLECTIVE_KINDS:
            sig = SIGNATURES[name]
            if len(args) != len(sig):
                problems.append(Problem(line, f"{name} takes {len(sig)} arguments, found {len(args)}"))
                continue
            named = {k: src.node_text(a) for k, a in zip(sig, args)}
            nodes = dict(zip(sig, args))
            send = P.root_identifier(src, nodes.get("sendbuff"))
            recv = P.root_identifier(src, nodes.get("recvbuff"))
            comm = P.root_identifier(src, nodes["comm"])
            if not comm or (comm not in comms and comm.split("->")[0] not in comms and not comm.endswith("->comm")):
                problems.append(Problem(line, f"{name} at line {line} uses communicator `{named['comm']}`, which is "
                                        "not declared as ncclComm_t in this file; pass a traceable ncclComm_t variable"))
            in_place = name == "ncclBcast" or (bool(send) and send == recv)
            fn = _function(src, n)
            colls.append((Collective(name, COLLECTIVE_KINDS[name], line, n.end_point[0] + 1, named, send, recv,
                                     in_place, comm, named["stream"], fn, _loop(src, n), None,
                                     _macro(src, n), _span(_name_node(n)), _rank_dependent(src, n),
                                     storage.of(fn, send), storage.of(fn, recv)), n))
        elif name in ("ncclGroupStart", "ncclGroupEnd"):
            group_marks.append((name, n))
        elif name in COMM_APIS:
            comm_calls.append(CommCall(name, line, _span(_name_node(n))))
        elif name == "ncclRedOpCreatePreMulSum":
            problems.append(Problem(line, f"line {line}: ncclRedOpCreatePreMulSum creates a custom reduction operator; "
                                    "the LSA rules reduce only with ncclSum/Prod/Max/Min/Avg, so it needs the LLM path"))
        elif UNKNOWN_COLLECTIVE.match(name):
            problems.append(Problem(line, f"{name} at line {line} has no fast-path rule (known: "
                                    f"{', '.join(sorted(COLLECTIVE_KINDS))}); it needs the LLM path"))
        elif name in ALLOC_APIS and args:
            var = P.root_identifier(src, args[0])
            allocs.append(Allocation(name, var, src.node_text(args[1]) if len(args) > 1 else "", line,
                                     _span(_name_node(n)), storage.of(_function(src, n), var)))
        elif name in FREE_APIS and args:
            var = P.root_identifier(src, args[0])
            frees.append(Free(name, var, line, _span(_name_node(n)), storage.of(_function(src, n), var)))
        elif name in SYNC_APIS:
            fn = _function(src, n)
            copied = tuple(storage.of(fn, P.root_identifier(src, a)) for a in args[:2]) if "Memcpy" in name else ()
            syncs.append(SyncPoint(name, tuple(src.node_text(a) for a in args), line, fn, _loop(src, n), copied))
    groups = _groups(src, group_marks, colls, nccl_calls, problems)
    coll_list = []
    for i, (c, _node) in enumerate(colls):
        gi = next((g for g, grp in enumerate(groups) if i in grp.members), None)
        coll_list.append(c if gi is None else _with_group(c, gi))
    abi, launch_body, ctx_name = _abi_functions(src)
    form = "candidate_abi" if "cuco_candidate_launch" in abi else "standalone"
    analysis = Analysis(path, form, text.count("\n") + 1, tuple(coll_list), tuple(allocs), tuple(frees),
                        tuple(kernels), tuple(launches), tuple(syncs), tuple(groups), tuple(comm_calls), (),
                        tuple(problems), _include_end(src), abi, launch_body, ctx_name,
                        _launch_model(text, form, comm_calls, groups), _names(storage, coll_list, allocs), storage.parameters)
    return attrs.evolve(analysis, edges=tuple(dataflow_edges(analysis)))


def _launch_model(text: str, form: str, comm_calls: list[CommCall], groups: list[GroupSpan]) -> str:
    """How ranks map to processes (see Analysis.launch_model). ncclCommInitRank inside an NCCL group without
    threads is one process creating every device's communicator (NCCL requires the group for that)."""
    # a transformed program: its own calls, not the prelude's wrappers; cucoCommInit* records NCCL's call
    begin, end = text.find("// ==== cuco fast path: device-initiated"), text.find("// ==== end of cuco fast path prelude")
    lo, hi = (text.count("\n", 0, begin) + 1, text.count("\n", 0, end) + 1) if 0 <= begin < end else (0, -1)
    apis = {c.api.replace("cucoComm", "ncclComm", 1) for c in comm_calls if not lo <= c.line <= hi}
    if form == "candidate_abi":
        return "candidate-abi"
    if "ncclCommInitAll" in apis:
        return "single-process"
    inits = {"ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitRankScalable"}
    if apis & inits:
        if _THREADS.search(text):
            return "thread-per-gpu"
        grouped = any(c.api.replace("cucoComm", "ncclComm", 1) in inits and g.start_line < c.line < g.end_line
                      for c in comm_calls for g in groups)
        return "single-process" if grouped else "process-per-gpu"
    return "unknown"


def _names(storage: Storage, colls: list[Collective], allocs: list[Allocation]) -> dict[int, tuple[str, ...]]:
    """Program names of every storage class a collective or an allocation uses (for reports and messages)."""
    ids = {c.send_storage for c in colls} | {c.recv_storage for c in colls} | {x.storage for x in allocs}
    return {i: storage.names(i) for i in sorted(ids - {-1})}


def _with_group(c: Collective, gi: int) -> Collective:
    return attrs.evolve(c, group=gi)


def _groups(src: P.Source, marks, colls, nccl_calls, problems) -> list[GroupSpan]:
    """Pair ncclGroupStart/End by nesting in text order (outermost pairs form the groups)."""
    out, stack = [], []
    for name, node in sorted(marks, key=lambda m: m[1].start_byte):
        if name == "ncclGroupStart":
            stack.append(node)
            continue
        if not stack:
            problems.append(Problem(P.line_of(node), f"ncclGroupEnd at line {P.line_of(node)} has no ncclGroupStart"))
            continue
        start = stack.pop()
        if stack:
            continue  # nested group: the outermost pair decides
        lo, hi = start.start_byte, node.end_byte
        members = tuple(i for i, (_c, n) in enumerate(colls) if lo < n.start_byte < hi)
        others = tuple(sorted({nm for nm, n in nccl_calls if lo < n.start_byte < hi and nm not in COLLECTIVE_KINDS
                               and nm not in ("ncclGroupStart", "ncclGroupEnd") and not nm.startswith("ncclGetError")}))
        out.append(GroupSpan(P.line_of(start), P.line_of(node), members, others, _span(_name_node(start)),
                             _span(_name_node(node))))
    for node in stack:
        problems.append(Problem(P.line_of(node), f"ncclGroupStart at line {P.line_of(node)} has no matching ncclGroupEnd"))
    return out


def _abi_functions(src: P.Source) -> tuple[dict[str, Span], Span | None, str]:
    found: dict[str, Span] = {}
    body: Span | None = None
    ctx = "ctx"
    for n in P.walk(src.root):
        if n.type != "function_definition":
            continue
        name = P.function_name(src, n)
        if not name.startswith("cuco_candidate_"):
            continue
        decl = n.child_by_field_name("declarator")
        while decl is not None and decl.type != "function_declarator":
            decl = decl.child_by_field_name("declarator")
        found[name] = _span(decl.child_by_field_name("declarator"))
        if name == "cuco_candidate_launch":
            b = n.child_by_field_name("body")
            body = _span(b)
            params = decl.child_by_field_name("parameters")
            ids = [x for x in P.walk(params) if x.type == "identifier"] if params is not None else []
            ctx = src.node_text(ids[-1]) if ids else "ctx"
    return found, body, ctx


def analyze_file(path: str | Path) -> Analysis:
    """The analysis of the host program at `path`; raises FastPathError when the file cannot be read as text."""
    p = Path(path)
    try:
        text = p.read_text()
    except UnicodeDecodeError:
        raise FastPathError(f"{p} is not a text file; give a CUDA C++ host program (.cu)") from None
    except OSError as exc:
        raise FastPathError(f"cannot read {p}: {exc.strerror}") from None
    return analyze(text, str(p))
