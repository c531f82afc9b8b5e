"""Key material never reaches what cuco stores or prints: provider errors can echo a key."""

from __future__ import annotations

import os
import re
from typing import Mapping

#: Shapes of common provider keys and tokens, matched anywhere in a text.
KEY_SHAPES = re.compile(
    r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}"      # OpenAI, Anthropic
    r"|AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}"         # AWS access key ids
    r"|AIza[0-9A-Za-z_\-]{30,}"                   # Google API keys
    r"|gh[pousr]_[A-Za-z0-9]{30,}|hf_[A-Za-z0-9]{30,}|xox[abprs]-[A-Za-z0-9\-]{10,}"
    r"|(?i:bearer)\s+[A-Za-z0-9._\-]{16,}"
    r"|eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}")  # JWTs
REDACTED = "[redacted]"


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """`text` with every value of a secret-looking environment variable and every key-shaped token replaced."""
    from cuco.process import is_allowed, is_secret

    env = os.environ if environ is None else environ
    for name, value in env.items():
        # a value of 8+ characters of any variable a candidate may not see, or of a secret-named one
        if len(value) >= 8 and (is_secret(name) or not is_allowed(name)) and value in text \
                and not value.startswith("/"):
            text = text.replace(value, REDACTED)
    return KEY_SHAPES.sub(REDACTED, text)
