"""Apply the rules: rewrite a host-driven program (standalone, or in candidate-ABI form) into a
device-initiated one. The rewrite is a set of byte-exact edits of the original text: a prelude with the LSA
kernels and their host runtime after the includes, host NCCL calls renamed to their drop-in replacements
(same arguments, same stream), symmetric allocation for communicated buffers, and EVOLVE-BLOCK markers."""

from __future__ import annotations

import re
from importlib import resources

import attrs

from cuco.fastpath import annotate
from cuco.fastpath import parse as P
from cuco.fastpath.analyze import analyze
from cuco.fastpath.model import Analysis, FastPathError, Problem
from cuco.fastpath.pipeline import pipeline_ranges
from cuco.fastpath.rules import (
    ALLOC_CALLS, COMM_END_CALLS, COMM_INIT_CALLS, FREE_CALLS, GROUP_CALLS, UNSUPPORTED_ALLOC, applicable, rule_for,
)

PRELUDE_BEGIN = "// ==== cuco fast path: device-initiated LSA collectives (generated) ===="
PRELUDE_END = "// ==== end of cuco fast path prelude ===="

_ABI_WRAPPERS = """
// ---- cuco fast path: candidate entry points (frozen) ----
extern "C" int cuco_candidate_requirements(const cuco_ctx* ctx, cuco_requirements* req) {
{seed_req}  cucoFpRequire(ctx, req);
  return 0;
}

extern "C" int cuco_candidate_launch(cuco_ctx* ctx) {
  if (cucoFpBind(ctx) != 0) return 1;
  return cuco_fp_seed_launch(ctx);
}
"""


@attrs.frozen
class Transformed:
    """The rewritten program, the rules applied, and the program's form ('standalone' or 'candidate_abi')."""

    code: str
    rules_applied: tuple[str, ...]
    form: str


@attrs.frozen
class _Edit:
    start: int
    end: int
    text: str
    priority: float    # order of insertions at one offset: prelude, block ends, block starts, renames


@attrs.frozen
class Plan:
    """What the rules would rewrite, and what stops them (each problem names its line and construct)."""

    rules_applied: tuple[str, ...]
    problems: tuple[Problem, ...]
    edits: tuple[_Edit, ...] = attrs.field(repr=False)


def _cuda_file(name: str) -> str:
    text = resources.files("cuco.fastpath").joinpath("cuda", name).read_text()
    text = re.sub(r'^#pragma once\n', "", text, flags=re.M)
    return re.sub(r'^#include "[^"]+"\n', "", text, flags=re.M)


#: The program harness (cuco/program/observe.h) records the program's device-to-host copies as its read-backs by
#: redefining these names; the runtime's own copies (peer bases, copy-engine transfers) are not the program's
#: outputs, so the runtime is compiled with the real functions.
_UNOBSERVED = ("cudaMemcpy", "cudaMemcpyAsync")
_UNOBSERVE_BEGIN = "".join(f'#pragma push_macro("{n}")\n#undef {n}\n' for n in _UNOBSERVED)
_UNOBSERVE_END = "".join(f'#pragma pop_macro("{n}")\n' for n in reversed(_UNOBSERVED))

#: The prelude's device code (an EVOLVE block) and host runtime, each file after the ones it includes.
_KERNEL_FILES = ("lsa_layout.cuh", "lsa_copy_bytes.cuh", "lsa_kernels.cuh", "lsa_signal.cuh", "lsa_push.cuh")
_RUNTIME_FILES = ("lsa_point.cuh", "lsa_runtime.cuh", "lsa_warm.cuh", "lsa_copy.cuh")


#: Bit of each NCCL data type in CUCOFP_REDUCE_TYPES (lsa_runtime.cuh: the reductions compiled for it).
REDUCE_TYPE_BITS = {"ncclInt8": 0, "ncclChar": 0, "ncclUint8": 1, "ncclInt32": 2, "ncclInt": 2, "ncclUint32": 3,
                    "ncclInt64": 4, "ncclUint64": 5, "ncclFloat16": 6, "ncclHalf": 6, "ncclBfloat16": 7,
                    "ncclFloat32": 8, "ncclFloat": 8, "ncclFloat64": 9, "ncclDouble": 9}
ALL_REDUCE_TYPES = 0x3FF
REDUCTIONS = ("allreduce", "reducescatter", "reduce")


def reduce_types(a: Analysis) -> int:
    """The data types the program's reductions use, as CUCOFP_REDUCE_TYPES bits: each rewritten reduction names
    its type as an NCCL literal, else (a variable, an expression) every type is compiled; 0 without reductions.
    Every rewrite compiles the reduction kernels of the types set, so programs without reductions skip them."""
    bits = 0
    for c in a.collectives:
        if c.kind in REDUCTIONS:
            bit = REDUCE_TYPE_BITS.get(c.args.get("datatype", "").strip())
            bits |= ALL_REDUCE_TYPES if bit is None else 1 << bit
    return bits


def prelude(form: str, types: int = ALL_REDUCE_TYPES) -> str:
    """The generated code inserted after the program's includes; `types`: the reductions' data types
    (reduce_types)."""
    kernels = "\n".join(_cuda_file(n).rstrip() + "\n" for n in _KERNEL_FILES)
    runtime = "\n".join(_cuda_file(n).rstrip() + "\n" for n in _RUNTIME_FILES)
    runtime += "\n" + _cuda_file("lsa_api.cuh").split("\n\n", 1)[1]
    if form == "candidate_abi":  # the harness owns the communicator: drop the standalone lifetime wrappers
        runtime = re.sub(r"// CUCOFP-STANDALONE-BEGIN.*?// CUCOFP-STANDALONE-END\n", "", runtime, flags=re.S)
    parts = [PRELUDE_BEGIN, f"#define CUCOFP_REDUCE_TYPES {types:#x}  // the reductions' data types (bits)\n",
             annotate.wrap(kernels, "lsa-kernels")]
    if form != "candidate_abi":  # delayed arrival and tracing for the program harness (cuco.program)
        parts.append(_cuda_file("program_hooks.cuh").rstrip() + "\n")
    parts.append(_UNOBSERVE_BEGIN + runtime.rstrip() + "\n" + _UNOBSERVE_END)
    if form == "candidate_abi":
        parts.append(_cuda_file("abi_bind.cuh").rstrip() + "\n")
    parts.append(PRELUDE_END + "\n")
    return "\n".join(parts)


def _blocking(problems: list[Problem]) -> FastPathError:
    lines = "\n".join(f"  - {p.message}" for p in problems)
    return FastPathError(f"the rule-based fast path cannot transform this program:\n{lines}")


_STATEMENT_LISTS = ("compound_statement", "translation_unit")


def _statement_at(src: P.Source, offset: int):
    """The statement holding byte `offset` that sits directly in a `{ ... }` list."""
    node = src.root.descendant_for_byte_range(offset, offset)
    while node is not None and (node.parent is None or node.parent.type not in _STATEMENT_LISTS):
        node = node.parent
    return node


def join_edits(src: P.Source, a: Analysis) -> list[_Edit]:
    """Where each stream waits for its communication (`cucoJoin();`, a no-op at placement=deferred): before the
    first statement after the collective (or its group) that is not a kernel launch independent of the
    transfer, i.e. one that touches neither buffer, else at the end of the enclosing block. Kernels in between
    overlap the transfer at placement=stream_overlap."""
    launches = {l.line: l for l in a.launches}
    edits: dict[int, _Edit] = {}
    for c in a.collectives:
        anchor = a.groups[c.group].end_span.start if c.group is not None else c.name_span.start
        stmt = _statement_at(src, anchor)
        if stmt is None:
            continue
        touched = {c.send_storage, c.recv_storage} - {-1}
        nxt = stmt.next_named_sibling
        while nxt is not None:
            if nxt.type == "comment":
                nxt = nxt.next_named_sibling
                continue
            lines = range(P.line_of(nxt), nxt.end_point[0] + 2)
            here = [launches[ln] for ln in lines if ln in launches]
            independent = (nxt.type == "expression_statement" and len(here) == 1 and touched
                           and -1 not in here[0].read_storage and -1 not in here[0].write_storage
                           and not touched & (set(here[0].read_storage) | set(here[0].write_storage)))
            if not independent:
                break
            nxt = nxt.next_named_sibling
        if nxt is not None:
            at = nxt.start_byte
            indent = src.data[src.data.rfind(b"\n", 0, at) + 1:at].decode("utf-8", "replace")
            text = "cucoJoin();\n" + (indent if not indent.strip() else "")
        else:   # the end of the block: before its closing brace
            block = stmt.parent
            at = block.end_byte - 1 if block.type == "compound_statement" else block.end_byte
            line_start = src.data.rfind(b"\n", 0, at) + 1
            indent = src.data[src.data.rfind(b"\n", 0, stmt.start_byte) + 1:stmt.start_byte].decode("utf-8", "replace")
            if not src.data[line_start:at].strip() and not indent.strip():
                at, text = line_start, indent + "cucoJoin();\n"
            else:
                text = " cucoJoin(); "
        edits.setdefault(at, _Edit(at, at, text, 0.5))   # before a rename or an END marker at `at`
    return list(edits.values())


def _kernel_ranges(src: P.Source, a: Analysis) -> list[tuple[int, int, str]]:
    out = []
    for n in P.walk(src.root):
        if n.type == "function_definition" and any(k.line == P.line_of(n) and k.name == P.function_name(src, n)
                                                    for k in a.kernels):
            top = n.parent if n.parent is not None and n.parent.type == "template_declaration" else n
            out.append((P.line_of(top), top.end_point[0] + 1, "kernel"))
    return out


def _symmetric_edits(a: Analysis) -> tuple[list[_Edit], list[Problem]]:
    """Allocations whose memory reaches a collective become symmetric (followed through the idioms in
    provenance.py). Frees of those classes, and frees of pointers no allocation reaches (a clean-up loop over
    several buffers), become symmetric frees, which fall back to the program's own free for other memory."""
    edits: list[_Edit] = []
    problems: list[Problem] = []
    roles: dict[int, tuple] = {}
    for c in a.collectives:
        for role, sid, buf, arg in (("send", c.send_storage, c.send_buffer, "sendbuff"),
                                    ("receive", c.recv_storage, c.recv_buffer, "recvbuff")):
            if arg not in c.args:
                continue
            if sid < 0:
                problems.append(Problem(c.line, f"line {c.line}: the {role} buffer `{c.args[arg]}` of {c.name} is "
                                        "not a variable the analysis can follow to an allocation (a call result "
                                        "or a literal); pass a pointer variable allocated in this file"))
                continue
            roles.setdefault(sid, (c, role, buf))
    converted: set[int] = set()
    arg_of = {"send": "sendbuff", "receive": "recvbuff"}
    for sid, (c, role, buf) in roles.items():
        allocs = [x for x in a.allocations if x.storage == sid]
        base = buf.replace("->", ".").split(".")[0]
        if not allocs and base in a.parameters.get(c.function, ()):
            problems.append(Problem(c.line, f"line {c.line}: the {role} buffer `{buf}` of {c.name} is a parameter of "
                                    f"{c.function}() and no call in this file passes it memory allocated here; peers "
                                    "can only read symmetric memory, so allocate it in this file with cudaMalloc, "
                                    "cudaMallocAsync or ncclMemAlloc"))
        elif not allocs and re.search(r"\.\s*(data|get)\s*\(\s*\)\s*$", c.args.get(arg_of[role], "")):
            problems.append(Problem(c.line, f"line {c.line}: the {role} buffer `{c.args[arg_of[role]]}` of {c.name} "
                                    f"is owned by an object whose allocation is not in this file (its class or "
                                    "factory is defined in a header, or allocates with an allocator cuco does not "
                                    "know); peers can only read symmetric memory, so cuco must see the cudaMalloc: "
                                    "define the buffer class in this file, or pass a pointer allocated here"))
        elif not allocs:
            problems.append(Problem(c.line, f"line {c.line}: the {role} buffer `{buf}` of {c.name} comes from no "
                                    "allocation in this file (followed through assignments, pointer offsets, "
                                    "casts, helper functions, lambdas, range-for lists, containers and struct "
                                    "fields); peers can only read symmetric memory, so allocate it here with "
                                    "cudaMalloc, cudaMallocAsync or ncclMemAlloc"))
        for x in allocs:
            if x.api in UNSUPPORTED_ALLOC:
                problems.append(Problem(x.line, f"line {x.line}: `{x.variable}` ({role} buffer of {c.name} at line "
                                        f"{c.line}) is allocated with {x.api}; {UNSUPPORTED_ALLOC[x.api]}"))
            elif x.api in ALLOC_CALLS:
                edits.append(_Edit(x.name_span.start, x.name_span.end, ALLOC_CALLS[x.api], 3))
                converted.add(sid)
    allocated = {x.storage for x in a.allocations}
    for f in a.frees:   # symmetric classes, and pointers of no known allocation (e.g. a clean-up loop's variable)
        if converted and f.api in FREE_CALLS and (f.storage in converted or f.storage not in allocated):
            edits.append(_Edit(f.name_span.start, f.name_span.end, FREE_CALLS[f.api], 3))
    return list(dict.fromkeys(edits)), problems


def plan(a: Analysis) -> Plan:
    """The rule-based rewrite of `a` as edits, or the problems that block it."""
    if not a.collectives:
        unknown = [p for p in a.problems if "no fast-path rule" in p.message]
        if unknown:
            return Plan((), tuple(unknown), ())
        return Plan((), (Problem(0, f"{a.path}: no NCCL collective or send/recv call found; nothing to transform"),), ())
    applied, problems = applicable(a)
    problems = list(a.fatal_problems) + problems
    edits: list[_Edit] = []
    for c in a.collectives:
        rule = rule_for(c)
        if rule is not None:
            edits.append(_Edit(c.name_span.start, c.name_span.end, rule.replacement[c.name], 3))
    for g in a.groups:
        if g.members and not g.other_nccl:
            edits.append(_Edit(g.start_span.start, g.start_span.end, GROUP_CALLS["ncclGroupStart"], 3))
            edits.append(_Edit(g.end_span.start, g.end_span.end, GROUP_CALLS["ncclGroupEnd"], 3))
    if a.form == "standalone":
        for cc in a.comm_calls:
            if cc.api in COMM_END_CALLS:
                edits.append(_Edit(cc.name_span.start, cc.name_span.end, COMM_END_CALLS[cc.api], 3))
            elif cc.api in COMM_INIT_CALLS:
                edits.append(_Edit(cc.name_span.start, cc.name_span.end, COMM_INIT_CALLS[cc.api], 3))
        sym_edits, sym_problems = _symmetric_edits(a)
        edits += sym_edits
        problems += sym_problems
    return Plan(tuple(applied), tuple(problems), tuple(edits))


def transform(a: Analysis, text: str, point_block: str = "") -> Transformed:
    """Rule-based rewrite of `text` (analysed as `a`); raises FastPathError listing every blocking problem.
    `point_block` (a design point's macros, cuco.program.space) goes before the prelude, which reads them."""
    p = plan(a)
    if not a.collectives and not p.problems[0].line:
        raise FastPathError(p.problems[0].message)
    if p.problems:
        raise _blocking(list(p.problems))
    applied, edits = p.rules_applied, list(p.edits)
    src = P.parse(text)
    ranges = _kernel_ranges(src, a)
    if a.form == "candidate_abi":
        tail = _abi_edits(a, src, edits)
        ranges += [(s, e, "pipeline") for s, e, lbl in _launch_range(src) if lbl]
    else:
        tail = ""
        ranges += pipeline_ranges(src, a)
        edits += join_edits(src, a)
    for start, end, marker in annotate.line_ranges_to_edits(src.data, ranges):
        edits.append(_Edit(start, end, marker, 1 if "END" in marker else 2))
    edits.append(_Edit(a.include_end, a.include_end, "\n" + point_block + prelude(a.form, reduce_types(a)), 0))
    code = _apply(src.data, edits).decode("utf-8") + tail
    _self_check(code, a.path)
    return Transformed(code, tuple(applied), a.form)


def _launch_range(src: P.Source) -> list[tuple[int, int, str]]:
    for n in P.walk(src.root):
        if n.type == "function_definition" and P.function_name(src, n) == "cuco_candidate_launch":
            top = n.parent if n.parent is not None and n.parent.type == "linkage_specification" else n
            return [(P.line_of(top), top.end_point[0] + 1, "pipeline")]
    return []


def _abi_edits(a: Analysis, src: P.Source, edits: list[_Edit]) -> str:
    """Rename the seed's entry points and return the frozen wrappers appended at the end of the file."""
    launch = a.abi_functions["cuco_candidate_launch"]
    edits.append(_Edit(launch.start, launch.end, "cuco_fp_seed_launch", 3))
    seed_req = ""
    if "cuco_candidate_requirements" in a.abi_functions:
        span = a.abi_functions["cuco_candidate_requirements"]
        edits.append(_Edit(span.start, span.end, "cuco_fp_seed_requirements", 3))
        seed_req = "  int rc = cuco_fp_seed_requirements(ctx, req);\n  if (rc != 0) return rc;\n"
    return _ABI_WRAPPERS.replace("{seed_req}", seed_req)


def _apply(data: bytes, edits: list[_Edit]) -> bytes:
    out, pos = [], 0
    for e in sorted(edits, key=lambda e: (e.start, e.priority)):
        if e.start < pos:
            raise FastPathError(f"internal: overlapping rewrites at byte {e.start}")
        out.append(data[pos:e.start])
        out.append(e.text.encode("utf-8"))
        pos = e.end
    out.append(data[pos:])
    return b"".join(out)


def _self_check(code: str, path: str) -> None:
    """The output must have no host collective and balanced EVOLVE markers."""
    annotate.check_markers(code)
    left = analyze(code, path + " (transformed)").collectives
    if left:
        raise FastPathError("internal: host collectives remain after the rewrite at lines "
                            + ", ".join(str(c.line) for c in left))
