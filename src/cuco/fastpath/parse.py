"""Parse a CUDA C++ host program into a syntax tree.

Why tree-sitter and not libclang: it needs no CUDA toolkit headers or compile flags (libclang would have to
preprocess `cuda_runtime.h` and `nccl.h` correctly to give a usable tree), it is error-tolerant (a file that
uses an unknown macro still yields a tree for everything around it), and it is a small pip-installable
wheel. Its C++ grammar does not know CUDA: we mask `kernel<<<g, b, s, st>>>(args)` into
`kernel  (g, b, s, st)  (args)` (a call of a call) and blank out `__global__`-style qualifiers, always
replacing bytes one for one, so every byte offset, line and column of the masked text equals the original.
"""

from __future__ import annotations

import re
from typing import Iterator

import attrs
import tree_sitter
import tree_sitter_cpp

_LANGUAGE = tree_sitter.Language(tree_sitter_cpp.language())

#: CUDA declaration qualifiers that tree-sitter-cpp cannot parse; blanked (same length) before parsing.
_QUALIFIERS = re.compile(rb"__(global|device|host|forceinline|noinline|shared|constant|managed|grid_constant)__"
                         rb"|__launch_bounds__\s*\([^()]*\)")
_LAUNCH = re.compile(rb"<<<(.*?)>>>", re.S)


@attrs.frozen
class Source:
    """A parsed program: original text, masked text and tree, and where launches / __global__ were."""

    text: str
    data: bytes                       # original UTF-8 bytes
    masked: bytes = attrs.field(repr=False)
    tree: tree_sitter.Tree = attrs.field(eq=False, repr=False)
    launch_spans: tuple[tuple[int, int], ...]    # byte ranges of `<<<...>>>`
    global_offsets: tuple[int, ...]              # byte offsets of `__global__`

    @property
    def root(self) -> tree_sitter.Node:
        """The root node of the syntax tree."""
        return self.tree.root_node

    def node_text(self, node: tree_sitter.Node | None) -> str:
        """Original text of a node (launch brackets and qualifiers restored)."""
        if node is None:
            return ""
        return self.data[node.start_byte:node.end_byte].decode("utf-8", "replace")

    def is_kernel(self, fn: tree_sitter.Node) -> bool:
        """True when a function_definition was declared `__global__` (blanked before its first token)."""
        return any(g < fn.start_byte and not self.masked[g:fn.start_byte].strip() for g in self.global_offsets) or \
            any(fn.start_byte <= g < (fn.child_by_field_name("body") or fn).start_byte for g in self.global_offsets)

    def is_launch(self, call: tree_sitter.Node) -> bool:
        """True when `call` is the inner `kernel<<<...>>>` part of a masked launch."""
        fn = call.child_by_field_name("function")
        args = call.child_by_field_name("arguments")
        return fn is not None and args is not None and any(s == args.start_byte - 2 for s, _ in self.launch_spans)


def mask_cuda(data: bytes) -> tuple[bytes, list[tuple[int, int]], list[int]]:
    """Masked copy of `data` (same length), the launch spans and the `__global__` offsets."""
    out = bytearray(data)
    globals_ = [m.start() for m in re.finditer(rb"__global__", data)]
    for m in _QUALIFIERS.finditer(data):
        out[m.start():m.end()] = b" " * (m.end() - m.start())
    spans = []
    for m in _LAUNCH.finditer(data):
        if b";" in m.group(1) or b"{" in m.group(1):
            continue  # not a launch configuration (e.g. `a <<< b` in odd code); leave it to the parser
        out[m.start():m.start() + 3] = b"  ("
        out[m.end() - 3:m.end()] = b")  "
        spans.append((m.start(), m.end()))
    return bytes(out), spans, globals_


def parse(text: str) -> Source:
    """The program parsed with tree-sitter, its CUDA launch syntax masked first."""
    data = text.encode("utf-8")
    masked, spans, globals_ = mask_cuda(data)
    tree = tree_sitter.Parser(_LANGUAGE).parse(masked)
    return Source(text, data, masked, tree, tuple(spans), tuple(globals_))


# ---- tree helpers ---------------------------------------------------------------------------------------
def walk(node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    """Pre-order traversal."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def line_of(node: tree_sitter.Node) -> int:
    """1-based line of the node's first byte."""
    return node.start_point[0] + 1


def callee_name(src: Source, call: tree_sitter.Node) -> str:
    """Name of the function called ('' for calls through expressions); templates lose their arguments."""
    fn = call.child_by_field_name("function")
    if fn is None:
        return ""
    if fn.type == "template_function":
        fn = fn.child_by_field_name("name") or fn
    if fn.type in ("identifier", "field_identifier"):
        return src.node_text(fn)
    if fn.type == "qualified_identifier":
        return src.node_text(fn).split("::")[-1]
    return ""


def call_args(call: tree_sitter.Node) -> list[tree_sitter.Node]:
    """The argument nodes of a call expression, comments left out."""
    args = call.child_by_field_name("arguments")
    return [c for c in args.named_children if c.type != "comment"] if args is not None else []


def ancestors(node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    """The node's ancestors, nearest first."""
    n = node.parent
    while n is not None:
        yield n
        n = n.parent


def enclosing(node: tree_sitter.Node, types: tuple[str, ...]) -> tree_sitter.Node | None:
    """The nearest ancestor whose type is one of `types`, or None."""
    for a in ancestors(node):
        if a.type in types:
            return a
    return None


def function_name(src: Source, fn: tree_sitter.Node | None) -> str:
    """Name of a function_definition node."""
    if fn is None:
        return ""
    decl = fn.child_by_field_name("declarator")
    while decl is not None and decl.type not in ("function_declarator",):
        decl = decl.child_by_field_name("declarator")
    if decl is None:
        return ""
    name = decl.child_by_field_name("declarator")
    return src.node_text(name).split("::")[-1] if name is not None else ""


def root_identifier(src: Source, expr: tree_sitter.Node | None) -> str:
    """The variable an expression is built on: `buf[r] + off` -> 'buf', `(float*)ctx->buffers[0].ptr` ->
    'ctx->buffers[0]', `&x` -> 'x'. '' for literals and calls."""
    n = expr
    while n is not None:
        t = n.type
        if t in ("identifier", "this"):
            return src.node_text(n)
        if t == "field_expression":
            arg = n.child_by_field_name("argument")
            field = src.node_text(n.child_by_field_name("field"))
            if field == "ptr" and arg is not None and arg.type == "subscript_expression":
                return src.node_text(arg).replace(" ", "")
            if arg is not None and arg.type == "identifier" and field not in ("ptr", "data"):
                return src.node_text(n).replace(" ", "")
            n = arg
        elif t in ("subscript_expression",):
            n = n.child_by_field_name("argument")
        elif t in ("cast_expression",):
            n = n.child_by_field_name("value")
        elif t in ("parenthesized_expression",):
            n = n.named_children[0] if n.named_children else None
        elif t in ("pointer_expression", "unary_expression"):
            n = n.child_by_field_name("argument")
        elif t == "binary_expression":
            n = n.child_by_field_name("left")
        elif t == "call_expression" and (fn := n.child_by_field_name("function")) is not None and \
                fn.type == "field_expression" and src.node_text(fn.child_by_field_name("field")) in ("data", "get"):
            n = fn.child_by_field_name("argument")
        elif t == "call_expression" and callee_name(src, n) in ("reinterpret_cast", "static_cast", "const_cast") \
                and call_args(n):
            n = call_args(n)[0]
        elif t in ("static_cast_expression", "reinterpret_cast_expression"):
            n = n.named_children[-1] if n.named_children else None
        else:
            return ""
    return ""


def syntax_errors(src: Source, limit: int = 5) -> list[tuple[int, str]]:
    """(line, snippet) of ERROR / MISSING nodes left after masking, for diagnostics."""
    out = []
    for n in walk(src.root):
        if n.type == "ERROR" or n.is_missing:
            out.append((line_of(n), src.node_text(n)[:60] or n.type))
            if len(out) >= limit:
                break
    return out
