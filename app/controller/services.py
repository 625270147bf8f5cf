"""Periodic work as a table: one scheduler posts each app's timer events to that app's own queue.

Why: the apps used to run their own ``while True: ... hub.sleep`` loops, each with its own catch-all
and its own way of stopping, and the loops changed app state from outside the app's event loop.
Here (after Faucet's ``_VALVE_SERVICES``) an app declares its periodic work as rows of
:class:`Service` (an event class and an interval); the :class:`Scheduler` only *posts* those events,
so the work runs in the app's handlers, one at a time with its other events; and every run goes
through :meth:`Scheduler.run`, the one failure policy: an exception is logged with its traceback to
the controller's error log, counted per service and in ``guard.failures`` (``GET /health``), and the
service carries on at its next period.

A service never piles up: while its last event waits in the queue or runs, the next period posts
nothing (a slow switch delays the next poll instead of queueing a backlog).

:class:`Deadline` is the one-shot kind: an event posted once a due time has passed, which a later
call may push back (the settle timers of forwarding and the OTS driver).

Plain code: ``spawn``/``sleep`` are injected (the apps pass ``hub.spawn``/``hub.sleep``; unit tests
pass fakes), ``post`` delivers an event to the owning app.
"""
from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from app.controller import guard
from app.db.fencing import StaleEpoch

LOG = logging.getLogger("mlte.controller.services")

#: every started scheduler of this process (``GET /health`` lists their services)
RUNNING: list[Scheduler] = []


@dataclass(frozen=True)
class Service:
    """One row of an app's periodic work: post ``event()`` every ``interval`` seconds (± ``jitter``,
    a fraction), the first time ``first`` seconds after start (default: one interval). ``interval``
    None: work the app posts itself (:meth:`Scheduler.later`), here for its failure policy and figures."""

    name: str
    event: Callable[[], Any]
    interval: float | None
    jitter: float = 0.0
    first: float | None = None

    def __post_init__(self) -> None:
        if self.interval is not None and self.interval <= 0:
            raise ValueError(f"service {self.name}: interval must be > 0, got {self.interval}")
        if not 0.0 <= self.jitter < 1.0:
            raise ValueError(f"service {self.name}: jitter must be in [0, 1), got {self.jitter}")


@dataclass
class ServiceStats:
    """What ``GET /health`` shows per service."""

    runs: int = 0
    failures: int = 0
    refused: int = 0  # runs whose database write the epoch fence refused (this controller no longer leads)
    skipped: int = 0  # periods that posted nothing because the last event was still pending
    last_s: float = 0.0  # duration of the last run
    max_s: float = 0.0
    last_error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "failures": self.failures, "refused": self.refused, "skipped": self.skipped,
                "last_ms": round(self.last_s * 1e3, 3), "max_ms": round(self.max_s * 1e3, 3),
                "last_error": self.last_error}


@dataclass
class _State:
    service: Service
    pending: bool = False
    stats: ServiceStats = field(default_factory=ServiceStats)


class Scheduler:
    """Drives an app's :class:`Service` table: one green thread per service posts its events."""

    def __init__(self, owner: str, post: Callable[[Any], None], services: Iterable[Service],
                 spawn: Callable[..., Any], sleep: Callable[[float], None],
                 rand: Callable[[float, float], float] = random.uniform,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.owner = owner
        self._post = post
        self._spawn, self._sleep, self._rand, self._clock = spawn, sleep, rand, clock
        self._states: dict[str, _State] = {}
        for s in services:
            if s.name in self._states:
                raise ValueError(f"{owner}: two services named {s.name!r}")
            self._states[s.name] = _State(s)
        self.active = False

    # ---- driving ----------------------------------------------------------------------------------
    def start(self) -> None:
        self.active = True
        if self not in RUNNING:
            RUNNING.append(self)
        for st in self._states.values():
            if st.service.interval is not None:
                self._spawn(self._drive, st)

    def stop(self) -> None:
        """No event is posted after this (a thread asleep posts nothing when it wakes)."""
        self.active = False
        if self in RUNNING:
            RUNNING.remove(self)

    def period(self, s: Service) -> float:
        assert s.interval is not None
        return s.interval * (self._rand(1.0 - s.jitter, 1.0 + s.jitter) if s.jitter else 1.0)

    def _drive(self, st: _State) -> None:
        s = st.service
        assert s.interval is not None  # only periodic rows get a driver
        self._sleep(s.interval if s.first is None else s.first)
        while self.active:
            self.tick(s.name)
            self._sleep(self.period(s))

    def tick(self, name: str) -> bool:
        """One period of service ``name``: post its event unless the last one is still pending."""
        st = self._states[name]
        if not self.active:
            return False
        if st.pending:
            st.stats.skipped += 1
            return False
        st.pending = True
        try:
            self._post(st.service.event())
        except Exception:  # noqa: BLE001 - the owner is gone (stopping): nothing will handle it
            st.pending = False
            LOG.debug("%s: posting %s failed", self.owner, name, exc_info=True)
            return False
        return True

    def later(self, delay: float, event: Any) -> None:
        """Post ``event`` once, ``delay`` seconds from now (unless stopped meanwhile): follow-ups of a
        handler's own work (a second look, a repeated probe), still handled in the owner's queue."""

        def fire() -> None:
            self._sleep(delay)
            if self.active:
                self._post(event)

        self._spawn(fire)

    # ---- the one failure policy -------------------------------------------------------------------
    def protect(self, name: str, fn: Callable[[], Any]) -> Any:
        """The failure policy of service ``name`` for work that belongs to it but runs from another
        handler (e.g. a poll finished by its last reply): logged, counted, swallowed."""
        st = self._states[name]
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - one failure policy for every service (module doc)
            self._failed(st, exc)
            return None

    def _failed(self, st: _State, exc: Exception) -> None:
        if isinstance(exc, StaleEpoch):  # a deposed leader's write, refused by the fence: expected, one line
            st.stats.refused += 1
            LOG.warning("%s: service %s: %s", self.owner, st.service.name, exc)
            return
        st.stats.failures += 1
        st.stats.last_error = repr(exc)
        guard.failures.append(f"{self.owner}.{st.service.name}: {exc!r}")
        guard.ERROR_LOG.exception("%s: service %s failed", self.owner, st.service.name)

    def run(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run one period's work (from the owner's handler): the exception, if any, is logged with its
        traceback, counted, and swallowed, so the service runs again next period."""
        st = self._states[name]
        start = self._clock()
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - one failure policy for every service (module doc)
            self._failed(st, exc)
            return None
        finally:
            took = self._clock() - start
            st.pending = False
            st.stats.runs += 1
            st.stats.last_s = took
            st.stats.max_s = max(st.stats.max_s, took)

    def status(self) -> dict[str, dict[str, Any]]:
        return {f"{self.owner}.{n}": st.stats.to_json() for n, st in self._states.items()}


class Deadline:
    """Post ``event()`` once ``due`` has passed; :meth:`push` moves the due time later (never earlier),
    re-arming after it fired. One green thread at a time waits for it."""

    def __init__(self, post: Callable[[Any], None], event: Callable[[], Any],
                 spawn: Callable[..., Any], sleep: Callable[[float], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._post, self._event = post, event
        self._spawn, self._sleep, self._clock = spawn, sleep, clock
        self.due: float | None = None
        self._waiting = False
        self.active = True

    def push(self, due: float) -> None:
        """Fire at ``due`` (or at the later due time already set)."""
        self.due = due if self.due is None else max(self.due, due)
        if not self._waiting and self.active:
            self._waiting = True
            self._spawn(self._wait)

    def _wait(self) -> None:
        try:
            while self.active and self.due is not None and self._clock() < self.due:
                self._sleep(max(0.05, self.due - self._clock()))
        finally:
            self._waiting = False
        if self.active:
            self.due = None
            self._post(self._event())

    def stop(self) -> None:
        self.active = False


def health(schedulers: Iterable[Scheduler] | None = None) -> dict[str, dict[str, Any]]:
    """Every service's figures (of the running schedulers by default), for ``GET /health``."""
    out: dict[str, dict[str, Any]] = {}
    for s in RUNNING if schedulers is None else schedulers:
        out.update(s.status())
    return out


def app_scheduler(app: Any, services: Iterable[Service]) -> Scheduler:
    """The scheduler of an os-ken app: its events go to the app's own queue, on the hub's threads
    (every controller app builds its scheduler this one way)."""
    from os_ken.lib import hub

    return Scheduler(app.name, lambda ev: app.send_event(app.name, ev), services, spawn=hub.spawn, sleep=hub.sleep)
