"""The executed update plans of this controller run, newest last (``GET /plans``, ``mlte plans``).

Plain data like the journal: the reservations app and ``POST /plan`` append each
:class:`app.update.executor.PlanRecord` as JSON (with who asked for it); the database keeps the
reservation plans for good (``plans`` table).
"""
from __future__ import annotations

from collections import deque
from typing import Any

from app.controller.journal import JOURNAL


class PlanLog:
    """The last ``size`` plan records."""

    def __init__(self, size: int = 200) -> None:
        self._items: deque[dict[str, Any]] = deque(maxlen=size)

    def add(self, record: dict[str, Any], **context: Any) -> dict[str, Any]:
        item = {**record, **context}
        self._items.append(item)
        return item

    def items(self, limit: int = 50, reservation_id: int | None = None) -> list[dict[str, Any]]:
        out = [p for p in self._items if reservation_id is None or p.get("reservation_id") == reservation_id]
        return out[-limit:][::-1]


PLANS = PlanLog()


def journal_event(event: dict[str, Any], **context: Any) -> None:
    """An executor progress event (``plan_started``, ``step_done``, ...) as a ``plan`` journal entry."""
    JOURNAL.add("plan", **{k: v for k, v in event.items() if k != "t"}, **context)
