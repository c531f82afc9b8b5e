"""The rows of a one-GPU probe: each printed as one JSON line as soon as it is measured (a cut-off run keeps what it
printed), then all of them written to the probe's --json file, if one is named."""

from __future__ import annotations

import json
from typing import Any, Iterable


def collect(rows: Iterable[dict[str, Any]], json_path: str | None) -> list[dict[str, Any]]:
    """Every row of `rows` (measured as it is drawn), printed, then written as {"rows": [...]} to `json_path`."""
    out = []
    for row in rows:
        out.append(row)
        print(json.dumps(row), flush=True)
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"rows": out}, f, indent=1)
    return out
