"""Where device memory comes from: pointer names grouped into storage classes (names that may point into
the same allocation). Followed through declarations and assignments, pointer arithmetic and casts, helper
functions and lambdas (arguments to parameters, returns to callers), range-for over brace lists and
containers, push_back/emplace_back, std::swap and struct fields (`b->partial` in a helper that was passed
`&buf` is `buf.partial`), and buffer-owning types: an object (or a container of objects) of a class with pointer
members points where those members do (`cudaMalloc(&ptr_, ...)` in its constructor; `.data()`/`.get()` are
read through), and a smart pointer or class constructed from a pointer (`DevicePtr(p)`, `std::unique_ptr<float,
D>(p)`) points where `p` does. Flow-insensitive and over-approximating: two names in one class *may* alias, so
every object of a buffer class shares the class's storage."""

from __future__ import annotations

import re

import attrs
import tree_sitter

from cuco.fastpath import parse as P

_CASTS = ("reinterpret_cast", "static_cast", "const_cast", "dynamic_cast")
_APPENDS = ("push_back", "emplace_back", "push_front", "emplace_front", "insert", "emplace")
_FREES = ("cudaFree", "cudaFreeAsync", "ncclMemFree", "cudaFreeHost")
_DECLARING = ("declaration", "for_range_loop", "init_declarator", "field_declaration")
_RETURN = "<return>"
#: Standard types that own or view a pointer given to their constructor.
_SMART = ("unique_ptr", "shared_ptr", "span")

Key = tuple[str, str]      # (scope, name): scope is a function name, '' for globals; name may be 'buf.partial'


def _declared_name(src: P.Source, decl: tree_sitter.Node | None) -> str:
    """The identifier a declarator declares (`*p`, `p[4]`, `&p`, `p = ...` -> 'p')."""
    while decl is not None and decl.type not in ("identifier", "field_identifier"):
        decl = decl.child_by_field_name("declarator") or (decl.named_children[0] if decl.named_children else None)
    return src.node_text(decl) if decl is not None else ""


def _only_freed(src: P.Source, loop: tree_sitter.Node, name: str) -> bool:
    """True when a range-for's variable is used only as the pointer a free call releases (a clean-up loop:
    nothing flows between the listed buffers, so they keep their own classes)."""
    body = loop.child_by_field_name("body")
    uses = [n for n in P.walk(body) if n.type == "identifier" and src.node_text(n) == name] if body else []
    return bool(uses) and all(
        u.parent is not None and u.parent.type == "argument_list" and u.parent.named_children[0] == u
        and P.callee_name(src, u.parent.parent) in _FREES for u in uses)


def _params(src: P.Source, plist: tree_sitter.Node | None) -> list[str]:
    if plist is None:
        return []
    return [_declared_name(src, p.child_by_field_name("declarator")) for p in plist.named_children
            if p.type in ("parameter_declaration", "optional_parameter_declaration")]


@attrs.define
class Storage:
    """Union-find over pointer names; `of(scope, root)` is the class of a root as `parse.root_identifier` gives it."""

    parent: dict = attrs.field(factory=dict)
    declared: dict[str, set[str]] = attrs.field(factory=dict)
    ids: dict = attrs.field(factory=dict)          # class representative -> stable small id (after building)
    parameters: dict[str, tuple[str, ...]] = attrs.field(factory=dict)   # function -> its parameter names

    def key(self, scope: str, root: str) -> Key:
        """The key of `root` as used in function `scope`: local when `scope` declares it, else global."""
        name = root.replace("->", ".").replace(" ", "")
        base = name.split(".")[0].split("[")[0]
        return (scope, name) if base in self.declared.get(scope, ()) else ("", name)

    def find(self, k) -> object:
        """The representative of `k`'s class (a new key is a class of its own)."""
        self.parent.setdefault(k, k)
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def union(self, a, b) -> None:
        """Merge the classes of `a` and `b`."""
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb

    def of(self, scope: str, root: str) -> int:
        """Class id of `root` used in function `scope` (-1 for no name)."""
        if not root:
            return -1
        return self.ids.setdefault(self.find(self.key(scope, root)), len(self.ids))

    def names(self, cls: int) -> tuple[str, ...]:
        """The program names in class `cls` (for messages)."""
        return tuple(sorted({k[1] for k in self.parent if len(k) == 2 and k[0] != "field" and k[1] != _RETURN
                             and self.ids.get(self.find(k)) == cls}))

    def close_fields(self) -> None:
        """`b.f` and `buf.f` share a class when `b` and `buf` do."""
        for _ in range(4):
            before = {k: self.find(k) for k in list(self.parent)}
            for k in list(self.parent):
                if len(k) == 2 and "." in k[1]:
                    base, field = k[1].rsplit(".", 1)
                    self.union(k, ("field", self.find((k[0], base)), field))
            if before == {k: self.find(k) for k in before}:
                return


class _Builder:
    def __init__(self, src: P.Source):
        self.src = src
        self.st = Storage()
        self.functions: dict[str, list[str]] = {}          # callable name -> parameter names
        self.scope_of_params: dict[str, str] = {}           # callable name -> scope its parameters live in
        self.members: dict[str, list[str]] = {}             # class name -> its pointer members
        self.wrappers: set[str] = set()                     # type names constructed from a pointer they own

    def scope(self, node: tree_sitter.Node) -> str:
        return P.function_name(self.src, P.enclosing(node, ("function_definition",)))

    def collect(self) -> None:
        """Callables (functions and named lambdas) with their parameters, and the names each function declares."""
        src = self.src
        for n in P.walk(src.root):
            if n.type == "function_definition":
                name = P.function_name(src, n)
                decl = n.child_by_field_name("declarator")
                while decl is not None and decl.type != "function_declarator":
                    decl = decl.child_by_field_name("declarator")
                params = _params(src, decl.child_by_field_name("parameters") if decl is not None else None)
                self.functions.setdefault(name, params)
                self.scope_of_params.setdefault(name, name)
                self.st.parameters.setdefault(name, tuple(params))
                self.st.declared.setdefault(name, set()).update(params)
            elif n.type in ("class_specifier", "struct_specifier") and n.child_by_field_name("body") is not None:
                self.collect_class(n)
            elif n.type == "alias_declaration" or n.type == "type_definition":
                typ = n.child_by_field_name("type")
                alias = n.named_children[0] if n.type == "alias_declaration" else n.child_by_field_name("declarator")
                if typ is not None and alias is not None and any(w in src.node_text(typ) for w in _SMART):
                    self.wrappers.add(src.node_text(alias))
            elif n.type == "lambda_expression":
                holder = n.parent
                decl = n.child_by_field_name("declarator")
                params = _params(src, decl.child_by_field_name("parameters") if decl is not None else None)
                scope = self.scope(n)
                self.st.declared.setdefault(scope, set()).update(params)
                if holder is not None and holder.type == "init_declarator":
                    name = _declared_name(src, holder.child_by_field_name("declarator"))
                    self.functions[name] = params
                    self.scope_of_params[name] = scope
            elif n.type in _DECLARING:
                scope = self.scope(n)
                if not scope:
                    continue
                decls = n.children_by_field_name("declarator") if n.type != "init_declarator" else \
                    [n.child_by_field_name("declarator")]
                for d in decls:
                    name = _declared_name(src, d)
                    if name:
                        self.st.declared.setdefault(scope, set()).add(name)

    def collect_class(self, n: tree_sitter.Node) -> None:
        """A class's pointer members (keys as its methods use them: unqualified, hence global)."""
        name = n.child_by_field_name("name")
        fields = [f for f in P.walk(n.child_by_field_name("body")) if f.type == "field_declaration"
                  and any(d.type == "pointer_declarator" for d in f.children_by_field_name("declarator"))]
        ptrs = [_declared_name(self.src, d) for f in fields for d in f.children_by_field_name("declarator")]
        if name is not None and ptrs:
            self.members[self.src.node_text(name)] = [p for p in ptrs if p]
            self.wrappers.add(self.src.node_text(name))

    def owned(self, type_text: str) -> list[tuple[str, str]]:
        """(member, its key) of every buffer class `type_text` names (`Buffer`, `std::vector<Buffer>`)."""
        words = set(re.findall(r"[A-Za-z_]\w*", type_text))
        return [(m, ("", m)) for cls, ms in self.members.items() if cls in words for m in ms]

    def roots(self, expr: tree_sitter.Node | None, scope: str) -> list:
        """Keys the value of `expr` may point into."""
        if expr is None:
            return []
        t = expr.type
        if t == "initializer_list":
            return [k for c in expr.named_children for k in self.roots(c, scope)]
        if t == "conditional_expression":
            return self.roots(expr.child_by_field_name("consequence"), scope) + \
                self.roots(expr.child_by_field_name("alternative"), scope)
        if t in ("parenthesized_expression",) and expr.named_children:
            return self.roots(expr.named_children[0], scope)
        if t == "call_expression":
            name = P.callee_name(self.src, expr)
            args = P.call_args(expr)
            if name in _CASTS and args:
                return self.roots(args[0], scope)
            if name in self.functions:
                return [(self.scope_of_params[name], _RETURN) if name == self.scope_of_params[name]
                        else ("lambda", name, _RETURN)]
            fn = expr.child_by_field_name("function")
            if args and fn is not None and (name in self.wrappers or any(w in self.src.node_text(fn) for w in _SMART)):
                return self.roots(args[0], scope)    # DevicePtr(p): the wrapper points where p does
        root = P.root_identifier(self.src, expr)
        return [self.st.key(scope, root)] if root else []

    def link(self, target, values: list) -> None:
        for v in values:
            self.st.union(target, v)

    def bind_call(self, name: str, args: list[tree_sitter.Node], scope: str) -> None:
        """Each parameter of callable `name` may point where the matching argument points."""
        params = self.functions[name]
        pscope = self.scope_of_params[name]
        for p, a in zip(params, args):
            if p:
                self.link(self.st.key(pscope, p), self.roots(a, scope))

    def edges(self) -> None:
        src = self.src
        for n in P.walk(src.root):
            scope = self.scope(n) if n.type in ("init_declarator", "assignment_expression", "for_range_loop",
                                                "call_expression", "return_statement", "field_expression") else ""
            if n.type == "field_expression":   # register `b->f` so that close_fields links it to `buf.f`
                root = P.root_identifier(src, n)
                if "." in root.replace("->", "."):
                    self.st.find(self.st.key(scope, root))
            elif n.type == "declaration" and self.members and (typ := n.child_by_field_name("type")) is not None:
                owned = self.owned(src.node_text(typ))    # `Buffer a(n), b(n);`, `std::vector<Buffer> v;`
                for d in n.children_by_field_name("declarator") if owned else ():
                    name = _declared_name(src, d)
                    if name and len(owned) == 1:      # one buffer: the object stands for it (`b.data()`)
                        self.link(self.st.key(self.scope(n), name), [owned[0][1]])
                    for member, key in owned if name and len(owned) > 1 else ():   # several: `obj.member`
                        self.link(self.st.key(self.scope(n), f"{name}.{member}"), [key])
            if n.type == "init_declarator":    # also inside a declaration: `DevicePtr g = device_alloc(n);`
                name = _declared_name(src, n.child_by_field_name("declarator"))
                value = n.child_by_field_name("value")
                if name and value is not None and value.type != "lambda_expression":
                    self.link(self.st.key(scope, name), self.roots(value, scope))
            elif n.type == "assignment_expression":
                left = P.root_identifier(src, n.child_by_field_name("left"))
                if left:
                    self.link(self.st.key(scope, left), self.roots(n.child_by_field_name("right"), scope))
            elif n.type == "for_range_loop":
                name = _declared_name(src, n.child_by_field_name("declarator"))
                if name and not _only_freed(src, n, name):
                    self.link(self.st.key(scope, name), self.roots(n.child_by_field_name("right"), scope))
            elif n.type == "return_statement" and n.named_children:
                fn = P.enclosing(n, ("function_definition", "lambda_expression"))
                if fn is not None and fn.type == "function_definition":
                    self.link((scope, _RETURN), self.roots(n.named_children[0], scope))
                elif fn is not None and fn.parent is not None and fn.parent.type == "init_declarator":
                    lam = _declared_name(src, fn.parent.child_by_field_name("declarator"))
                    self.link(("lambda", lam, _RETURN), self.roots(n.named_children[0], scope))
            elif n.type == "call_expression":
                self.call(n, scope)

    def call(self, n: tree_sitter.Node, scope: str) -> None:
        src = self.src
        fn = n.child_by_field_name("function")
        args = P.call_args(n)
        name = P.callee_name(src, n)
        if fn is not None and fn.type == "field_expression":
            name = src.node_text(fn.child_by_field_name("field"))
        if fn is not None and fn.type == "field_expression" and name in _APPENDS:
            obj = P.root_identifier(src, fn.child_by_field_name("argument"))
            if obj:
                for a in args:
                    self.link(self.st.key(scope, obj), self.roots(a, scope))
        elif name == "swap" and len(args) == 2:
            for k in self.roots(args[0], scope):
                self.link(k, self.roots(args[1], scope))
        elif name in self.functions:
            self.bind_call(name, args, scope)
        for i, a in enumerate(args):  # std::thread(worker, args...), threads.emplace_back(worker, args...)
            if a.type == "identifier" and src.node_text(a) in self.functions and a is not fn:
                self.bind_call(src.node_text(a), args[i + 1:], scope)
                break


def storage_classes(src: P.Source) -> Storage:
    """Storage classes of every pointer name of the program."""
    b = _Builder(src)
    b.collect()
    b.edges()
    b.st.close_fields()
    return b.st
