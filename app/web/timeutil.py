"""ISO 8601 ⇄ epoch seconds; the API speaks ISO 8601 with a UTC offset, the DB stores epoch floats."""
from __future__ import annotations

from datetime import datetime, timezone


def to_iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def parse_iso(text: str) -> float:
    """Parse ISO 8601; a time without an offset is taken as UTC. Raises ValueError."""
    if not isinstance(text, str) or not text:
        raise ValueError("expected an ISO 8601 date-time string")
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    dt = datetime.fromisoformat(value)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()
