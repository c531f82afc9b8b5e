"""One template style for every workload: `@NAME@` placeholders, filled in one pass, nothing left over."""

from __future__ import annotations

import re
from typing import Mapping

from cuco.errors import CucoError

#: A placeholder: '@' + upper-case name + '@' (e.g. @CHUNK_BYTES@).
PLACEHOLDER = re.compile(r"@([A-Z][A-Z0-9_]*)@")


class TemplateError(CucoError, ValueError):
    """A template was filled with a missing, unknown or leftover placeholder; the message names it."""


def placeholders(template: str) -> set[str]:
    """Names of the placeholders in `template`."""
    return set(PLACEHOLDER.findall(template))


def fill(template: str, values: Mapping[str, object], *, what: str = "template") -> str:
    """`template` with every @NAME@ replaced by str(values[NAME]).

    Raises TemplateError when a placeholder has no value, a value has no placeholder (a misspelt key), or
    the result still holds a placeholder (a value that brought one in: fill nested fragments first).
    """
    names = placeholders(template)
    missing = sorted(names - set(values))
    if missing:
        raise TemplateError(f"{what}: no value for placeholder(s) {', '.join('@%s@' % m for m in missing)}; "
                            "pass them to fill()")
    unused = sorted(set(values) - names)
    if unused:
        raise TemplateError(f"{what}: value(s) {', '.join(unused)} match no placeholder; check the spelling or "
                            "drop them")
    out = PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), template)
    left = sorted(placeholders(out))
    if left:
        raise TemplateError(f"{what}: placeholder(s) {', '.join('@%s@' % n for n in left)} remain after filling "
                            "(a value carried them in); fill the fragment that holds them before inserting it")
    return out
