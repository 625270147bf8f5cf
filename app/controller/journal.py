"""A bounded, sequence-numbered log of controller events, read by ``GET /events`` and the scan.

A log only: apps learn of a change of the network view from the view's change bus
(:mod:`app.controller.view_changes`), never by polling this. Plain data (no os-ken): appended to from
handlers, read by API greenthreads with ``since``.
"""
from __future__ import annotations

import itertools
import time
from collections import deque
from typing import Any


class Journal:
    """Keep the last ``size`` events; each gets an increasing ``seq`` and a wall-clock ``t``."""

    def __init__(self, size: int = 5000) -> None:
        self._items: deque[dict[str, Any]] = deque(maxlen=size)
        self._seq = itertools.count(1)
        self.last_seq = 0

    def add(self, event_type: str, /, **fields: Any) -> dict[str, Any]:
        self.last_seq = next(self._seq)
        item = {"seq": self.last_seq, "t": time.time(), "type": event_type, **fields}
        self._items.append(item)
        return item

    def since(self, seq: int = 0, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self._items if e["seq"] > seq and (kind is None or e["type"] == kind)]


JOURNAL = Journal()
