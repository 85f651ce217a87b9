"""How every benchmark reports: one aligned line per figure, and the same figures as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def report(result: dict[str, Any], out: str | Path) -> None:
    width = max((len(key) for key in result), default=0)
    for key, value in result.items():
        if isinstance(value, list) and len(value) > 20:
            value = f"[{len(value)} values: in the JSON]"
        print(f"{key:<{width}}  {value}")
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
