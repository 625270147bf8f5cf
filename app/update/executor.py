"""Run a plan against a :class:`Southbound`: ready steps in parallel, roll-back on failure, a record.

Ordered mode runs in rounds: every step whose dependencies are done goes to ``run_parallel`` at
once (the os-ken shim passes an eventlet greenthread runner, tests a thread pool); the next round
starts when the round is over. A step that fails or times out before the plan's commit point rolls
the plan back: the inverse of every completed change (and of a change whose barrier never answered,
since it may have been applied), in reverse dependency order, so the old ingress rule is restored
before the new path goes. After the commit point nothing is rolled back: the steps that do not
depend on the failed one still run and the plan ends ``failed``. One-shot mode sends every change
in one round without barriers and never rolls back.

Time comes in as ``clock`` (timestamps, deadlines) and ``sleep`` (polling); the shim passes the hub's.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from app.update.model import FlowRule, Outcome
from app.update.plan import (
    ADD,
    ONE_SHOT,
    CircuitUpStep,
    DrainStep,
    FlowStep,
    GroupStep,
    Plan,
    Step,
    VerifyStep,
    XconStep,
)
from app.update.southbound import Southbound

log = logging.getLogger("mlte.update")

T = TypeVar("T")
RunParallel = Callable[[list[Callable[[], Any]]], list[Any]]
Event = dict[str, Any]

DONE, FAILED, ROLLED_BACK = "done", "failed", "rolled_back"
DEFAULT_POLL_S = 0.005
#: a verify step's reads start ``poll_s`` apart and the gap grows by half each read up to this many
#: ``poll_s``: a rule's counter moves only when the switch refreshes it (OVS: every 0.1-0.5 s), and on a
#: long path each read is a request per switch (an arrival over 18 switches on germany50)
VERIFY_GAP_MAX = 4.0
#: a verify step whose rules keep beginning to count waits ``timeout_s`` from the last one that began, up
#: to this many ``timeout_s`` in all: on a long, slow path the probes reach the far rules last (germany50
#: on a loaded machine: links of ~140 ms one way, a 22-link arrival's far end 3 s and more away)
VERIFY_PROGRESS_MAX = 4.0


def sequential(thunks: list[Callable[[], T]]) -> list[T]:
    """Run thunks one after another (a runner without parallelism, for tests and tools)."""
    return [t() for t in thunks]


def threaded(thunks: list[Callable[[], T]]) -> list[T]:
    """Run thunks on one OS thread each and wait for all (a runner for code outside the eventlet hub)."""
    if len(thunks) <= 1:
        return sequential(thunks)
    with ThreadPoolExecutor(max_workers=len(thunks)) as pool:
        return list(pool.map(lambda t: t(), thunks))


@dataclass
class StepRecord:
    """What happened to one step (``ok`` None: never ran, because a step it depends on failed)."""

    id: str
    kind: str
    target: str
    deps: list[str]
    started_at: float | None = None
    finished_at: float | None = None
    ok: bool | None = None
    error: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "target": self.target, "deps": list(self.deps),
                "started_at": self.started_at, "finished_at": self.finished_at, "ok": self.ok,
                "error": self.error, "detail": dict(self.detail)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> StepRecord:
        return cls(d["id"], d["kind"], d["target"], list(d["deps"]), d["started_at"], d["finished_at"], d["ok"],
                   d.get("error", ""), dict(d.get("detail", {})))


@dataclass
class PlanRecord:
    """The report of one executed plan; ``rollback`` holds the roll-back's own steps (if any)."""

    id: str
    kind: str
    mode: str
    state: str = DONE
    error: str = ""
    started_at: float | None = None
    finished_at: float | None = None
    steps: list[StepRecord] = field(default_factory=list)
    rollback: list[StepRecord] = field(default_factory=list)
    failed_step: str | None = None

    def step(self, step_id: str) -> StepRecord:
        for s in self.steps + self.rollback:
            if s.id == step_id:
                return s
        raise KeyError(step_id)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "mode": self.mode, "state": self.state, "error": self.error,
                "failed_step": self.failed_step, "started_at": self.started_at, "finished_at": self.finished_at,
                "steps": [s.to_json() for s in self.steps], "rollback": [s.to_json() for s in self.rollback]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PlanRecord:
        return cls(d["id"], d["kind"], d["mode"], d["state"], d.get("error", ""), d["started_at"], d["finished_at"],
                   [StepRecord.from_json(s) for s in d["steps"]],
                   [StepRecord.from_json(s) for s in d.get("rollback", ())], d.get("failed_step"))


class _Run:
    """One execution: the southbound, time, the event sink; runs plans (the plan and its roll-back)."""

    def __init__(self, sb: Southbound, run_parallel: RunParallel, clock: Callable[[], float],
                 sleep: Callable[[float], None], on_event: Callable[[Event], None] | None, poll_s: float) -> None:
        self.sb, self.run_parallel, self.clock, self.sleep = sb, run_parallel, clock, sleep
        self.on_event, self.poll_s = on_event, poll_s

    def emit(self, event: str, plan: Plan, **kw: Any) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event({"event": event, "plan": plan.id, "t": self.clock(), **kw})
        except Exception:  # a broken listener must not leave the network half-updated
            log.exception("update event listener failed on %s of plan %s", event, plan.id)

    # ------------------------------------------------------------------ one step
    def step(self, s: Step, barrier: bool) -> Outcome:
        sb = self.sb
        if isinstance(s, XconStep):
            return (sb.install_xcon if s.op == ADD else sb.remove_xcon)(s.xcon, barrier=barrier)
        if isinstance(s, FlowStep):
            out = (sb.install_flow if s.op == ADD else sb.remove_flow)(s.rule, barrier=barrier)
            if out.ok and barrier and s.settle_s > 0:
                self.sleep(s.settle_s)  # the barrier reply precedes the datapath switch
            return out
        if isinstance(s, GroupStep):
            return (sb.set_group if s.op == ADD else sb.remove_group)(s.group, barrier=barrier)
        if isinstance(s, CircuitUpStep):
            return self.circuit_up(s)
        if isinstance(s, VerifyStep):
            return self.verify(s)
        if isinstance(s, DrainStep):
            return self.drain(s)
        raise TypeError(f"unknown step type {type(s).__name__}")

    def circuit_up(self, s: CircuitUpStep) -> Outcome:
        deadline = self.clock() + s.timeout_s
        if s.ports:
            out = self.sb.wait_ports_up(s.ports, s.stable_s, s.timeout_s)
            if not out.ok:
                return out
        for a, b in s.links:
            left = deadline - self.clock()
            out = self.sb.wait_link(a, b, left) if left > 0 else Outcome.refused(
                f"no time left to see link {a[0]}:{a[1]}-{b[0]}:{b[1]} (timeout {s.timeout_s} s)")
            if not out.ok:
                return out
        return Outcome.done(self.clock())

    def _counts(self, rules: Sequence[FlowRule]) -> list[int | None]:
        return self.sb.flow_packets_many(rules)

    def verify(self, s: VerifyStep) -> Outcome:
        """Each rule's counter must rise by ``min_packets`` from its value now; a rule not on its switch
        yet (one-shot: still in flight) counts from 0 once it appears. A rule that has risen is not read
        again: on a long path most polls then ask a few switches, not every one. The step fails once no
        rule has begun to count for ``timeout_s`` (at most ``VERIFY_PROGRESS_MAX`` × ``timeout_s`` in
        all): traffic that is still advancing along a slow path is not a broken path."""
        start = self.clock()
        base = self._counts(s.rules)
        progress, cap = start, start + VERIFY_PROGRESS_MAX * s.timeout_s
        rise: dict[str, int | None] = {r.target(): None for r in s.rules}
        todo = list(range(len(s.rules)))
        gap = self.poll_s
        while True:
            now = self._counts([s.rules[i] for i in todo])
            for i, c in zip(todo, now, strict=True):
                if base[i] is None and c is not None:
                    base[i] = 0
                b = base[i]
                rise[s.rules[i].target()] = None if c is None or b is None else c - b
            left = [i for i in todo if (d := rise[s.rules[i].target()]) is None or d < s.min_packets]
            if not left:
                return Outcome.done(self.clock(), packets=rise)
            if len(left) < len(todo):
                progress = self.clock()
            todo = left
            deadline = min(progress + s.timeout_s, cap)
            if self.clock() >= deadline:
                missing = [t for t, d in rise.items() if d is None]
                idle = [t for t, d in rise.items() if d is not None and d < s.min_packets]
                why = [f"{len(idle)} rule(s) counted < {s.min_packets} packet(s): {'; '.join(idle)}"] if idle else []
                why += [f"not on their switch: {'; '.join(missing)}"] if missing else []
                waited = self.clock() - start
                since = f"; the last rule began to count {progress - start:.2f} s in" if progress > start else ""
                return Outcome.refused(f"no traffic on the new path within {s.timeout_s} s{since} "
                                       f"({waited:.2f} s in all): {' / '.join(why)}", packets=rise)
            self.sleep(min(gap, max(0.0, deadline - self.clock())))
            gap = min(1.5 * gap, VERIFY_GAP_MAX * self.poll_s)

    def drain(self, s: DrainStep) -> Outcome:
        start = self.clock()
        deadline = start + s.timeout_s
        last = self._counts(s.rules)
        quiet_since = start
        moving: list[str] = []
        while True:
            self.sleep(self.poll_s)
            now_t = self.clock()
            now = self._counts(s.rules)
            if now != last:
                moving = [r.target() for r, a, b in zip(s.rules, last, now, strict=True) if a != b]
                last, quiet_since = now, now_t
            elif now_t - quiet_since >= s.quiet_s:
                return Outcome.done(now_t, quiet_s=round(now_t - quiet_since, 6))
            if now_t >= deadline:
                return Outcome.refused(f"old path still carries traffic after {s.timeout_s} s: "
                                       f"{'; '.join(moving)}")

    # ------------------------------------------------------------------ a plan
    def run(self, plan: Plan, records: list[StepRecord], rollback: bool) -> tuple[dict[str, Outcome], bool]:
        """Run ``plan`` into ``records``; returns (failures by step id, committed when they happened)."""
        barrier = plan.mode != ONE_SHOT
        recs = {s.id: StepRecord(s.id, s.kind, s.target(), sorted(s.deps)) for s in plan.steps}
        records.extend(recs[s.id] for s in plan.steps)
        done: set[str] = set()
        failures: dict[str, Outcome] = {}
        pending = plan.order()
        committed = not rollback

        def thunk(s: Step) -> Callable[[], tuple[float, float, Outcome]]:
            def go() -> tuple[float, float, Outcome]:
                t0 = self.clock()
                try:
                    out = self.step(s, barrier)
                except Exception as exc:  # a bug or a dead connection: state unknown, undo it if it writes
                    log.exception("step %s of plan %s raised", s.id, plan.id)
                    out = Outcome.timed_out(f"{type(exc).__name__}: {exc}")
                return t0, self.clock(), out
            return go

        while True:
            ready = [s for s in pending if s.deps <= done]
            if not ready:
                break
            results = self.run_parallel([thunk(s) for s in ready])
            new_failures: list[str] = []
            for s, (t0, t1, out) in zip(ready, results, strict=True):
                pending.remove(s)
                r = recs[s.id]
                r.started_at, r.finished_at, r.ok, r.error, r.detail = t0, t1, out.ok, out.error, dict(out.detail)
                if out.ok:
                    done.add(s.id)
                    self.emit("step_done", plan, step=s.id, kind=s.kind)
                else:
                    failures[s.id] = out
                    new_failures.append(s.id)
                    self.emit("step_failed", plan, step=s.id, kind=s.kind, reason=out.error)
            if not new_failures:
                continue
            committed = committed or (bool(plan.commit) and plan.commit <= done)
            if not committed:
                return failures, False
            blocked = set().union(*(plan.descendants(f) for f in new_failures))
            pending = [s for s in pending if s.id not in blocked]
        return failures, committed


def execute(plan: Plan, southbound: Southbound, *, run_parallel: RunParallel = sequential,
            clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
            on_event: Callable[[Event], None] | None = None, poll_s: float = DEFAULT_POLL_S) -> PlanRecord:
    """Execute ``plan``; roll back on a failure before its commit point; return the record.

    Events (``on_event``, small dicts with ``event``, ``plan``, ``t``): ``plan_started``, ``step_done``
    (``step``, ``kind``), ``step_failed`` (``step``, ``kind``, ``reason``), ``plan_rolled_back``
    (``step``, ``reason``, ``complete``), ``plan_done`` (``state``, ``error``)."""
    run = _Run(southbound, run_parallel, clock, sleep, on_event, poll_s)
    rec = PlanRecord(plan.id, plan.kind, plan.mode, started_at=clock())
    run.emit("plan_started", plan, kind=plan.kind, mode=plan.mode)
    failures, committed = run.run(plan, rec.steps, rollback=plan.mode != ONE_SHOT)
    if failures:
        first = next(s.id for s in plan.order() if s.id in failures)
        reason = failures[first].error
        rec.failed_step, rec.state = first, FAILED
        rec.error = f"step {first} failed: {reason}"
        if not committed:
            undo = {sid for sid, sr in ((s.id, rec.step(s.id)) for s in plan.steps) if sr.ok}
            undo |= {sid for sid, out in failures.items() if out.unknown}
            back = plan.undo(undo)
            rb_failures, _ = run.run(back, rec.rollback, rollback=False)
            skipped = [r.id for r in rec.rollback if r.ok is None]
            complete = not rb_failures and not skipped
            run.emit("plan_rolled_back", plan, step=first, reason=reason, complete=complete)
            if complete:
                rec.state = ROLLED_BACK
            else:
                bad = "; ".join(f"{k}: {v.error}" for k, v in rb_failures.items())
                rec.error += f"; roll-back incomplete ({bad or 'steps skipped'}; not undone: {', '.join(skipped)})"
    rec.finished_at = clock()
    run.emit("plan_done", plan, state=rec.state, error=rec.error)
    return rec
