"""A lab's clock: its progress lines' ``[  12.3s]`` stamps and how long it waited for the network lock
against how long it ran the network, so a lab's recorded duration is its own, not another lab's.

The labs must finish within 10 minutes (2 with ``--quick``); on a shared machine the wait for
``/tmp/mlte-net.lock`` can be longer than the lab itself, so ``results.json`` keeps both apart.
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any


class LabClock:
    """``note(text)`` prints with seconds since the lab started; ``locked()`` holds the network lock
    and notes when it got it; ``durations()`` is the ``lab_seconds`` record of ``results.json``."""

    def __init__(self, progress: Callable[[str], None]) -> None:
        self.progress = progress
        self.t0 = time.time()
        self.t_lock: float | None = None
        self.t_free: float | None = None

    def note(self, text: str) -> None:
        self.progress(f"[{time.time() - self.t0:6.1f}s] {text}")

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        from mininet_labs.netlock import net_lock

        with net_lock():
            self.t_lock = time.time()
            self.note("network lock held")
            try:
                yield
            finally:
                self.t_free = time.time()

    def durations(self) -> dict[str, Any]:
        """``lock_wait``: before the lock was held; ``network``: while held; ``total``: until now (s)."""
        now = time.time()
        lock = self.t_lock if self.t_lock is not None else now
        free = self.t_free if self.t_free is not None else now
        return {"lock_wait": round(lock - self.t0, 1), "network": round(free - lock, 1),
                "total": round(now - self.t0, 1)}
