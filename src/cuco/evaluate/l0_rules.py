"""The rules level 0 applies to every candidate's own text, a built-in workload's or a user's program's.

A forbidden function is refused however it is reached: called, parenthesised (`(kill)(...)`), taken by address
or reference (`&::open`), assigned (`auto e = exit;`), named in `decltype`, a template argument or
`std::function`, hidden in a macro body or resolved with `dlsym`. So the rule is not a list of call spellings:
the text is parsed with tree-sitter and every identifier that names a forbidden function is refused, members of
an object (`gin.signal(...)`) excepted. Token pasting (`##`) could assemble a name the parse cannot see, so it
is refused too; includes must name an allowed header literally; inline asm must be a literal string, may not
issue system calls or read clocks, may not name a forbidden function or call a named symbol, and may not use
an assembler directive that reads a file or rebinds a symbol (`.include`, `.incbin`, `.symver`, ...); asm labels
and the attributes that bind a declaration to another symbol (`weakref`, `alias`, `ifunc`) are refused.
"""

from __future__ import annotations

import re
from typing import Iterator

import tree_sitter

from cuco.evaluate.l0_text import Lexed, Lines, Violation, lex
from cuco.fastpath import parse as P

WHY_PROCESS = "process, file, network and environment access is not allowed in a candidate (the harness owns I/O)"
WHY_CLOCK = "reading clocks in a candidate is not allowed (timing is measured by the harness only)"
WHY_EXIT = "a candidate must not end the process; return a non-zero error code from the entry point instead"
WHY_DEVICE = "a candidate must not reset the device or destroy the harness's communicator"
WHY_STREAM = "candidates use the harness's streams (ctx->stream, ctx->side_stream); do not create streams"
WHY_LOAD = "loading code at run time is not allowed; everything a candidate runs must be in its source"


def _why(why: str, names: str) -> dict[str, str]:
    return dict.fromkeys(names.split(), why)


#: Name -> why no candidate may refer to it (a member of an object with that name is fine).
FORBIDDEN_NAMES: dict[str, str] = {
    **_why(WHY_PROCESS, """
        system popen pclose fork vfork clone clone3 daemon setsid setpgid execl execlp execle execv execvp execvpe
        execve fexecve posix_spawn posix_spawnp kill killpg tgkill tkill pthread_kill raise signal sigaction
        sigqueue ptrace prctl syscall atexit at_quick_exit
        getenv secure_getenv setenv putenv unsetenv clearenv environ __environ _environ
        open open64 openat creat fopen fopen64 freopen fdopen remove unlink unlinkat rename renameat mkfifo mknod
        mkdir rmdir tmpfile tmpnam mkstemp mkdtemp opendir readdir truncate ftruncate chmod chown symlink readlink
        chdir mmap mprotect shm_open memfd_create pread pwrite readv writev lseek dup dup2 dup3 ioctl fcntl
        sendfile ifstream ofstream fstream basic_ifstream basic_ofstream basic_fstream filebuf basic_filebuf
        socket socketpair connect bind listen accept accept4 sendto recvfrom sendmsg recvmsg getaddrinfo
        gethostbyname"""),
    **_why(WHY_CLOCK, """clock clock64 globaltimer __globaltimer __clock64 clock_gettime gettimeofday timespec_get
        rdtsc __rdtsc chrono"""),
    **_why(WHY_EXIT, "exit _exit _Exit quick_exit abort terminate"),
    **_why(WHY_DEVICE, "cudaDeviceReset cudaThreadExit ncclCommDestroy ncclCommAbort ncclCommFinalize"),
    **_why(WHY_STREAM, "cudaStreamCreate cudaStreamCreateWithFlags cudaStreamCreateWithPriority cuStreamCreate"),
    # entry points of the driver and the dynamic loader hand out any function, forbidden ones included
    **_why(WHY_LOAD, """dlopen dlsym dlvsym dlmopen dladdr dlinfo dl_iterate_phdr cuModuleLoad cuModuleLoadData
        cuModuleLoadDataEx cuModuleLoadFatBinary cuLibraryLoadData cuLinkCreate cudaLibraryLoadData
        nvrtcCreateProgram cudaGetDriverEntryPoint cudaGetDriverEntryPointByVersion cuGetProcAddress
        cuGetProcAddress_v2"""),
}
#: PTX instructions that share a forbidden function's name: legal inside an asm string.
_PTX_WORDS = frozenset(("exit",))

#: Headers a candidate may include: exact names, or prefixes ending in '/'.
ALLOWED_INCLUDES = frozenset("""
    cuda.h cuda_runtime.h cuda_runtime_api.h cuda_bf16.h cuda_fp16.h cuda_fp8.h cuda_bf16.hpp cuda_fp16.hpp
    cuda_pipeline.h cuda_awbarrier.h cuda_awbarrier_primitives.h cuda_pipeline_primitives.h cuda_device_runtime_api.h
    device_launch_parameters.h vector_types.h vector_functions.h driver_types.h library_types.h mma.h
    cooperative_groups.h sm_90_rt.h crt/host_defines.h
    nccl.h nccl_device.h cublasLt.h cublas_api.h nvshmem.h nvshmemx.h
    stdint.h stddef.h stdio.h stdlib.h string.h math.h float.h limits.h assert.h stdbool.h inttypes.h
    cstdint cstddef cstdio cstdlib cstring cmath cfloat climits cassert cinttypes
    algorithm array atomic bit cstdarg functional initializer_list iostream limits memory mutex new numeric
    optional random tuple type_traits utility vector
""".split())
ALLOWED_INCLUDE_PREFIXES = ("cuco/", "cuda/", "cooperative_groups/", "nccl_device/", "cub/")

_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(include_next|include|import|embed|line|\d+)\b[ \t]*(.*)$", re.MULTILINE)
_INCLUDE = re.compile(r"#[ \t]*include[ \t]*([<\"])([^>\"\n]*)[>\"]")
_WORD = re.compile(r"(?<![\w.])(?<!->)[A-Za-z_]\w*")
_ASM = frozenset(("asm", "__asm__", "__asm"))
_CLOCK_ASM = re.compile(r"%%?(clock|globaltimer)", re.IGNORECASE)
# Substrings, not words: adjacent literals concatenate ("sys" "call") and run into their neighbours.
_SYSCALL_ASM = re.compile(r"syscall|sysenter|\bint\s*\$?0x80\b|\bsvc\b", re.IGNORECASE)
#: Assembler directives that read a file, name a location in another file, or bind a symbol to another one
#: (`.symver x, open@GLIBC_2.2.5` reaches libc's open without naming it in C).
_ASM_DIRECTIVE = re.compile(r"(?<![\w.%$])\.(include|incbin|file|line|loc|symver|set|equ|equiv|eqv|weakref|"
                            r"macro|irp|irpc|rept|purgem|altmacro|section|pushsection|popsection|previous)\b",
                            re.IGNORECASE)
#: A jump or call to a named symbol in host assembly reaches any libc function (`call __libc_system`).
_ASM_CALL = re.compile(r"(?<![\w.])(?:call[lqw]?|jmp[lqw]?|bl)\s+[A-Za-z_.$]", re.IGNORECASE)
#: Attributes that bind a declaration to another symbol by name (`weakref("open")` reaches libc's open).
_BINDING_ATTRIBUTES = frozenset(("alias", "weakref", "ifunc", "symver", "__alias__", "__weakref__", "__ifunc__",
                                 "__symver__"))
_ATTRIBUTE_NODES = frozenset(("attribute_specifier", "attribute", "attribute_declaration"))
_LITERAL_TYPES = frozenset(("string_literal", "raw_string_literal", "concatenated_string"))
_SKIPPED = frozenset(("comment", "string_literal", "raw_string_literal", "char_literal", "system_lib_string"))


def check_includes(text: str, line_of: Lines) -> list[Violation]:
    """Directives that read another file (`#include` of a header outside the allow-list, `#include_next`,
    `#embed`, `#import`, computed or climbing includes) or rename the file compiler messages name (`#line`).
    `text` is the normalised source with comments blanked."""
    out = []
    for m in _DIRECTIVE.finditer(text):
        kind, rest = m.group(1), m.group(2).strip()
        line = line_of(m.start())
        if kind not in ("include",):
            out.append(Violation(line, "include", f"#{kind} is not allowed in a candidate: it reads another file "
                                 "or renames this one in compiler messages; use #include <...> of an allowed header"))
        elif rest[:1] not in ("<", '"'):
            out.append(Violation(line, "include", f"#include {rest[:40]}: computed includes (a macro as the "
                                 "header name) are not allowed; name the header as <...> or \"...\""))
        else:
            name = rest[1:].split(">" if rest[0] == "<" else '"')[0].strip()
            if ".." in name.replace("\\", "/").split("/") or name.startswith(("/", "\\")) or "\\" in name:
                out.append(Violation(line, "include", f"#include {rest[:60]}: header paths may not climb out of "
                                     "the include directories ('..', absolute paths or backslashes)"))
    for m in _INCLUDE.finditer(text):
        if text[text.rfind("\n", 0, m.start()) + 1:m.start()].strip():
            continue  # not a directive: '#' is not the first thing on its line
        name = m.group(2).strip()
        if name in ALLOWED_INCLUDES or name.startswith(ALLOWED_INCLUDE_PREFIXES):
            continue
        out.append(Violation(line_of(m.start()), "include", f"#include {m.group(1)}{name}"
                             f"{'>' if m.group(1) == '<' else chr(34)} is not allowed: a candidate is one file and "
                             "may include only CUDA, NCCL, cuBLASLt, cuco/ and standard headers"))
    return out


def _is_member(node: tree_sitter.Node) -> bool:
    # `obj.open`, `p->close`, `{.open = 1}` and member declarations name a member, not the library function
    return node.type == "field_identifier"


def _in_attribute(node: tree_sitter.Node) -> bool:
    parent = node.parent
    for _ in range(3):   # identifier < call_expression < argument_list < attribute_specifier, or < attribute
        if parent is None:
            return False
        if parent.type in _ATTRIBUTE_NODES:
            return True
        parent = parent.parent
    return False


def _asm_text(src: P.Source, node: tree_sitter.Node) -> str:
    """The assembly of a literal asm argument, adjacent literals joined."""
    parts = [n for n in P.walk(node) if n.type in ("string_content", "escape_sequence", "raw_string_content")]
    return "".join(src.node_text(n) for n in parts)


def _check_asm(src: P.Source, keyword: tree_sitter.Node, line: int) -> list[Violation]:
    asm = keyword.parent
    code = asm.child_by_field_name("assembly_code") if asm is not None and asm.type == "gnu_asm_expression" else None
    literal = code is not None and (code.type in _LITERAL_TYPES - {"concatenated_string"} or (
        code.type == "concatenated_string" and all(c.type in _LITERAL_TYPES for c in code.named_children)))
    if not literal or any(c.type == "ERROR" for c in asm.children):
        return [Violation(line, "asm", "inline asm must be written as literal strings in the asm statement "
                          "(not a macro or an expression), so that it can be checked")]
    if asm.parent is None or asm.parent.type != "expression_statement":
        return [Violation(line, "asm", "an asm label (a declaration named after another symbol) is not allowed: "
                          "it binds the declaration to any function by name")]
    text = _asm_text(src, code)
    out = []
    if _SYSCALL_ASM.search(text):
        out.append(Violation(line, "forbidden", f"inline asm issuing a system call: {WHY_PROCESS}"))
    if _CLOCK_ASM.search(text):
        out.append(Violation(line, "clock-asm", f"inline asm reading a %clock or %globaltimer register: {WHY_CLOCK}"))
    directive = _ASM_DIRECTIVE.search(text)
    if directive:
        out.append(Violation(line, "asm", f"assembler directive .{directive.group(1)}: inline asm may not read "
                             "files or bind symbols; write instructions only"))
    if _ASM_CALL.search(text):
        out.append(Violation(line, "asm", "inline asm calling or jumping to a named symbol is not allowed: it "
                             "reaches any library function"))
    for word in sorted(set(re.findall(r"[A-Za-z_]\w*", text)) & FORBIDDEN_NAMES.keys() - _PTX_WORDS):
        out.append(Violation(line, "forbidden", f"{word} named in inline asm: {FORBIDDEN_NAMES[word]}"))
    return out


def _code_nodes(root: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    """Pre-order traversal that does not enter comments and literals."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type in _SKIPPED:
            continue
        yield node
        stack.extend(reversed(node.children))


def check_names(code: str, first_line: int = 1) -> list[Violation]:
    """Every reference to a forbidden name in `code` (normalised text), every asm statement that breaks the asm
    rules, and every token paste. Line numbers count from `first_line`."""
    src = P.parse(code)
    out: list[Violation] = []
    for node in _code_nodes(src.root):
        line = first_line + node.start_point[0]
        if node.type == "preproc_arg":   # a macro body is code wherever the macro is used
            body = lex(src.node_text(node)).code_only   # its comments and literal contents blanked
            if "##" in body:
                out.append(Violation(line, "token-paste", "token pasting (##) is not allowed: it can assemble "
                                     "forbidden identifiers"))
            for word in dict.fromkeys(_WORD.findall(body)):
                if word in FORBIDDEN_NAMES:
                    out.append(Violation(line, "forbidden", f"{word}: {FORBIDDEN_NAMES[word]}"))
                elif word in _ASM:
                    out.append(Violation(line, "asm", "inline asm inside a macro is not allowed: write the asm "
                                         "statement where it is used, as literal strings"))
            continue
        if node.child_count:
            continue
        text = src.node_text(node)
        if text in _ASM:
            out.extend(_check_asm(src, node, line))
        elif text in _BINDING_ATTRIBUTES and _in_attribute(node):
            out.append(Violation(line, "asm", f"attribute {text}: binding a declaration to another symbol by name "
                                 "is not allowed (it reaches any library function)"))
        elif text in FORBIDDEN_NAMES and not _is_member(node):
            out.append(Violation(line, "forbidden", f"{text}: {FORBIDDEN_NAMES[text]}"))
        elif text == "##" or (node.type == "ERROR" and "##" in text):
            out.append(Violation(line, "token-paste", "token pasting (##) is not allowed: it can assemble "
                                 "forbidden identifiers"))
    return out


def shared_violations(seen: str, lexed: Lexed, line_of: Lines, first_line: int = 1) -> list[Violation]:
    """The rules every candidate's own text obeys: includes, forbidden names, asm and token pasting.
    `seen` is the normalised text, `lexed` its lexing (Lines of `seen`)."""
    found = check_includes(lexed.no_comments, line_of)
    if first_line != 1:
        found = [Violation(v.line + first_line - 1, v.rule, v.message) for v in found]
    found += check_names(seen, first_line)
    if "##" in lexed.code_only and not any(v.rule == "token-paste" for v in found):
        found.append(Violation(first_line - 1 + line_of(lexed.code_only.index("##")), "token-paste",
                               "token pasting (##) is not allowed: it can assemble forbidden identifiers"))
    return found
