"""Fake time for :mod:`app.controller.services`: a scheduler's and a deadline's green threads are kept
until :meth:`FakeTimers.drain` runs them (first spawned, first run; ``sleep`` moves a fake clock), and
the events they post are handed to the app's handlers, so a test follows an app's periodic work step
by step without a hub."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from app.controller.services import Deadline, Scheduler, Service


class FakeTimers:
    def __init__(self, t: float = 0.0) -> None:
        self.t = t
        self.spawned: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self.posted: list[Any] = []
        self.slept: list[float] = []
        self.after: dict[int, Callable[[], Any]] = {}  # n -> what happens while the n-th sleep lasts

    def clock(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.t += s
        if (then := self.after.get(len(self.slept))) is not None:
            then()

    def spawn(self, f: Callable[..., Any], *args: Any) -> None:
        self.spawned.append((f, args))

    def scheduler(self, owner: str, rows: Iterable[Service]) -> Scheduler:
        """A started scheduler whose periodic drivers are not run (a test posts their events itself)."""
        sch = Scheduler(owner, self.posted.append, rows, spawn=self.spawn, sleep=self.sleep,
                        rand=lambda lo, hi: 1.0, clock=self.clock)
        sch.start()
        self.spawned.clear()
        return sch

    def deadline(self, event: Callable[[], Any]) -> Deadline:
        return Deadline(self.posted.append, event, spawn=self.spawn, sleep=self.sleep, clock=self.clock)

    def drain(self, handlers: dict[type, Callable[[Any], Any]], limit: int = 100) -> list[Any]:
        """Deliver what was posted and run the waiting threads until nothing is left; the events."""
        seen = []
        while (self.posted or self.spawned) and limit > 0:
            limit -= 1
            if self.posted:
                ev = self.posted.pop(0)
                seen.append(ev)
                handlers[type(ev)](ev)
            else:
                f, args = self.spawned.pop(0)
                f(*args)
        assert limit > 0, "timers never ran out"
        return seen
