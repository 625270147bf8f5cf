"""Read latency series (``t,latency_ms`` CSV) for the path-change detector command."""
from __future__ import annotations

import csv
from pathlib import Path

from monitor.errors import MonitorError


def read_latency_csv(path: str | Path) -> list[tuple[float, float]]:
    """Rows of ``t`` (seconds) and ``latency_ms``; a header row and ``#`` comments are allowed."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise MonitorError(f"cannot read {p}: {exc.strerror or exc}") from None
    rows: list[tuple[float, float]] = []
    for lineno, row in enumerate(csv.reader(text.splitlines()), 1):
        if not row or row[0].lstrip().startswith("#"):
            continue
        if len(row) < 2:
            raise MonitorError(f"{p}:{lineno}: expected 't,latency_ms', got {','.join(row)!r}")
        try:
            rows.append((float(row[0]), float(row[1])))
        except ValueError:
            if lineno == 1 or not rows:
                continue  # header
            raise MonitorError(f"{p}:{lineno}: not numbers: {','.join(row)!r}") from None
    if not rows:
        raise MonitorError(f"{p}: no latency samples")
    rows.sort()
    return rows
