"""Parsing CUDA host code with tree-sitter: masking keeps offsets; launches and kernels are recognised."""

from cuco.fastpath import parse as P

CODE = """#include <nccl.h>
template <class T> __global__ void __launch_bounds__(256) k(const T* x, T* y) { y[0] = x[0]; }
int main() {
  k<float><<<dim3(4, 1), 256, 0, s>>>(a, b);
  f(1)(2);
}
"""


def test_masking_keeps_length_lines_and_text():
    masked, spans, globals_ = P.mask_cuda(CODE.encode())
    assert len(masked) == len(CODE.encode())
    assert masked.count(b"\n") == CODE.count("\n")
    assert len(spans) == 1 and len(globals_) == 1
    src = P.parse(CODE)
    assert src.node_text(src.root) == CODE  # original text, not the masked one


def test_launch_and_kernel_detection():
    src = P.parse(CODE)
    calls = [n for n in P.walk(src.root) if n.type == "call_expression"]
    launches = [c for c in calls if src.is_launch(c)]
    assert len(launches) == 1
    assert P.line_of(launches[0]) == 4
    assert [src.node_text(a) for a in P.call_args(launches[0])] == ["dim3(4, 1)", "256", "0", "s"]
    assert P.callee_name(src, launches[0]) == "k"
    fns = [n for n in P.walk(src.root) if n.type == "function_definition"]
    assert [P.function_name(src, f) for f in fns if src.is_kernel(f)] == ["k"]
    # an ordinary call of a call is not a launch
    assert not any(src.is_launch(c) for c in calls if src.node_text(c).startswith("f(1)"))


def test_root_identifier_forms():
    src = P.parse("void g() { f(buf[r] + off, (float*)ctx->buffers[2].ptr, &x, v.data(), ctx->comm); }")
    call = next(n for n in P.walk(src.root) if n.type == "call_expression" and P.callee_name(src, n) == "f")
    roots = [P.root_identifier(src, a) for a in P.call_args(call)]
    assert roots == ["buf", "ctx->buffers[2]", "x", "v", "ctx->comm"]
