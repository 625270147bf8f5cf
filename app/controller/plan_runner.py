"""The one place the controller runs update plans (plain code: no os-ken).

``POST /plan``, ``POST /circuit``, the TE and mapping apps and the reservations all hand their plans
to one :class:`PlanRunner`, the only caller of :func:`app.update.executor.execute`. Around each run
it does what every caller used to repeat: keeps the packet ports of the circuit the plan opens away
from default forwarding (reserved for the caller's ``owner`` before the first step, given back when
the plan did not finish, or when a plan that ``releases`` the owner's circuit did), writes the plan
log (:data:`app.controller.plan_log.PLANS`) and the ``plan`` journal entries, and tells the apps
(``notify``: ``reserved_ports`` when the reserved set changed, ``plan`` for each executor event).

The southbound, the port book (the network view), time and the parallel-step runner come in, so unit
tests run it over ``tests/lib/fake_network.py``; the os-ken apps share one instance as the context
:data:`CONTEXT`, wired to the hub by :func:`app.controller.plan_runner_live.shared_runner`.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from app.controller import guard
from app.controller.plan_log import PLANS, PlanLog, journal_event
from app.update.executor import (
    DEFAULT_POLL_S,
    DONE,
    FAILED,
    ROLLED_BACK,
    PlanRecord,
    RunParallel,
    execute,
    sequential,
)
from app.update.model import Port
from app.update.plan import REMOVE, CircuitUpStep, Plan, XconStep
from app.update.recovery import FINISH, OWNER, STEP_DONE, STEP_FAILED, Decision, Held, Unfinished, recover
from app.update.southbound import Southbound
from topology.graph import MultiLayerGraph

CONTEXT = "mlte_plan_runner"
PLAN = "plan"  # what ``notify`` is told (a change of the reserved ports is the view's own announcement)
API_OWNER = "plan:"  # owners of POST /plan circuits: given back when a plan removes their XCONs

Notify = Callable[[str, dict[str, Any]], None]


class PlanStore(Protocol):
    """Where a leader's running plans are recorded (:class:`app.db.plan_records.PlanRecords`, or the
    writer's queue in front of it): the plan as it starts, each step's state, the outcome."""

    def start(self, plan: Mapping[str, Any], *, epoch: int | None, source: str, owner: str, started_at: float,
              reservation_id: int | None = None) -> Any: ...

    def step(self, uid: str, step_id: str, state: str) -> Any: ...

    def finish(self, uid: str, record: Mapping[str, Any], *, keep: bool = True) -> Any: ...


class RecoveryStore(Protocol):
    """The running records a new leader takes over (:class:`app.db.plan_records.PlanRecords`)."""

    def unfinished(self, epoch: int) -> list[Unfinished]: ...

    def claim(self, row_id: int, epoch: int) -> bool: ...

    def complete(self, row_id: int, epoch: int, state: str, error: str, finished_at: float) -> bool: ...


class PortBook(Protocol):
    """The packet ports kept from default forwarding (:class:`app.controller.network_view.NetworkView`)."""

    def reserve(self, owner: str, ports: Iterable[Port]) -> bool: ...

    def unreserve(self, owner: str) -> bool: ...

    def reservations_of(self, prefix: str) -> Mapping[str, Iterable[Port]]: ...

    def graph(self) -> tuple[MultiLayerGraph, list[str]]: ...


def opened_ports(plan: Plan) -> tuple[Port, ...]:
    """The packet ports of every circuit ``plan`` brings up (its circuit-up steps)."""
    return tuple(p for s in plan.steps if isinstance(s, CircuitUpStep) for p in s.ports)


class PlanRunner:
    """Runs plans for the apps: ports reserved and released, plan log, journal, events.

    Built bare (an os-ken context is created with no arguments) and :meth:`bind`-ed by the first app
    that uses it, or built whole (tests)."""

    def __init__(self, southbound: Southbound | None = None, ports: PortBook | None = None, *,
                 notify: Notify | None = None, run_parallel: RunParallel = sequential,
                 sleep: Callable[[float], Any] = time.sleep, clock: Callable[[], float] = time.time,
                 poll_s: float = DEFAULT_POLL_S, log: PlanLog = PLANS) -> None:
        self.southbound = southbound
        self.ports = ports
        self.notify: Notify = notify or (lambda _kind, _data: None)
        self.run_parallel = run_parallel
        self.sleep = sleep
        self.clock = clock
        self.poll_s = poll_s
        self.log = log
        # several controllers (issue 24): the leader's epoch and where its running plans are recorded;
        # both None for a single controller, which records nothing while a plan runs
        self.store: PlanStore | None = None
        self.epoch: int | None = None
        # told (record, source) after every plan: the metrics' plan counts and step times
        self.observers: list[Callable[[PlanRecord, str], None]] = []

    @property
    def bound(self) -> bool:
        return self.southbound is not None and self.ports is not None

    def bind(self, southbound: Southbound, ports: PortBook, notify: Notify, *, run_parallel: RunParallel,
             sleep: Callable[[float], Any], poll_s: float) -> None:
        """Wire a bare runner (the shared context) to the network; once: every app shares the same."""
        if self.bound:
            return
        self.southbound, self.ports, self.notify = southbound, ports, notify
        self.run_parallel, self.sleep, self.poll_s = run_parallel, sleep, poll_s

    def _book(self) -> PortBook:
        if self.ports is None:
            raise RuntimeError("the plan runner is not bound to the network view")
        return self.ports

    # ---- ports ---------------------------------------------------------------------------------------
    def reserve(self, owner: str, ports: Iterable[Port]) -> bool:
        """Keep default forwarding off ``ports`` for ``owner`` (also outside a plan: a reservation
        re-adopted after a restart); True if the reserved set changed (the apps were told)."""
        return self._book().reserve(owner, ports)

    def release(self, owner: str) -> bool:
        """Give ``owner``'s ports back to default forwarding; True if the reserved set changed."""
        return self._book().unreserve(owner)

    # ---- plans ---------------------------------------------------------------------------------------
    def run(self, plan: Plan, owner: str, kind: str, *, ports: Sequence[Port] | None = None,
            releases: bool = False, context: Mapping[str, Any] | None = None,
            southbound: Southbound | None = None, persist: bool = True) -> PlanRecord:
        """Run ``plan`` for ``owner`` (who holds its ports) on behalf of ``kind`` (the plan log's
        ``source``: api, circuit, te, mapping, reservations); block until done or rolled back.

        ``ports`` (default: those of the circuits the plan opens) are reserved for ``owner`` before
        the first step and given back if the plan does not finish; ``releases``: the plan takes
        ``owner``'s circuit down, so its ports are given back once it is done. A done plan that
        removed XCONs also frees the ``POST /plan`` circuits that hung on them. ``context`` goes into
        the plan log, the journal entries and the events (e.g. ``reservation_id``); ``southbound``
        replaces the runner's for this plan (``POST /circuit``: the OTS driver in per-OTS batches).
        Under a leader's epoch with a :attr:`store` (and ``persist``) the plan is recorded as it runs:
        ``running`` with the epoch, each step's state as it completes, then the outcome."""
        sb = southbound or self.southbound
        if sb is None:
            raise RuntimeError("the plan runner has no southbound")
        extra = dict(context or {})
        held = tuple(opened_ports(plan) if ports is None else ports)
        if held:
            self.reserve(owner, held)

        store = self.store if persist and self.epoch is not None else None
        if store is not None:
            res_id = extra.get("reservation_id")
            store.start(plan.to_json(), epoch=self.epoch, source=kind, owner=owner, started_at=self.clock(),
                        reservation_id=res_id if isinstance(res_id, int) else None)

        def on_event(event: dict[str, Any]) -> None:
            if store is not None and event.get("event") in ("step_done", "step_failed"):
                store.step(plan.id, str(event["step"]), STEP_DONE if event["event"] == "step_done" else STEP_FAILED)
            journal_event(event, **extra)
            self.notify(PLAN, {**event, **extra})

        record = execute(plan, sb, run_parallel=self.run_parallel, clock=self.clock, sleep=self.sleep,
                         poll_s=self.poll_s, on_event=on_event)
        done = record.state == DONE
        if (held and not done) or (releases and done):
            self.release(owner)
        if done:
            self._free_api_circuits(plan)
        self.log.add({**record.to_json(), **extra}, source=kind)
        for observe in self.observers:
            try:
                observe(record, kind)
            except Exception as exc:  # noqa: BLE001 - a figure must not fail the caller of a plan that is done
                guard.failures.append(f"plan observer: {exc!r}")
                guard.ERROR_LOG.exception("plan observer failed on plan %s", plan.id)
        if store is not None:  # the reservations keep their plans themselves (record_plan)
            store.finish(plan.id, record.to_json(), keep=kind != "reservations")
        return record

    # ---- takeover --------------------------------------------------------------------------------------
    def recover(self, store: RecoveryStore, epoch: int, held: Held,
                wanted: Callable[[Unfinished], bool]) -> list[tuple[Decision, str]]:
        """The new leader of ``epoch`` (switches read back into ``held``): finish or roll back every plan
        an older leader left running (:func:`app.update.recovery.recover`), each claimed first so it is
        handled exactly once; returns (decision, final state) of each plan this leader took."""
        out: list[tuple[Decision, str]] = []
        for d in recover(store.unfinished(epoch), epoch, held, wanted):
            if not store.claim(d.record.row, epoch):
                continue  # another leader has it
            rec = d.record
            if d.action == OWNER or d.plan is None:
                state, error = FAILED, f"leader of epoch {rec.epoch} stopped mid-plan; {d.reason}"
            else:
                ctx = {"recovers": rec.plan.get("id"), "from_epoch": rec.epoch, "action": d.action}
                finish = d.action == FINISH
                ports = opened_ports(Plan.from_json(rec.plan)) if finish else ()
                result = self.run(d.plan, rec.owner or f"recovery:{rec.row}", "recovery", ports=ports,
                                  releases=not finish, context=ctx, persist=False)
                ok = result.state == DONE
                state = (DONE if finish else ROLLED_BACK) if ok else FAILED
                error = (f"leader of epoch {rec.epoch} stopped mid-plan; {d.action} by epoch {epoch}: {d.reason}"
                         + ("" if ok else f"; {result.error}"))
            store.complete(rec.row, epoch, state, error, self.clock())
            out.append((d, state))
        return out

    def _free_api_circuits(self, plan: Plan) -> None:
        """Give back the ports of ``POST /plan`` circuits whose XCONs ``plan`` removed (nothing else
        releases them: a plan sent through the API has no owner that lives on)."""
        gone = {(s.xcon.ots, port) for s in plan.steps if isinstance(s, XconStep) and s.op == REMOVE
                for port in (s.xcon.in_port, s.xcon.out_port)}
        if not gone:
            return
        book = self._book()
        held = book.reservations_of(API_OWNER)
        if not held:
            return
        g, _ = book.graph()
        freed = {a for ots, port in gone if f"{ots}:{port}" in g.g and (a := g.adaptation_at(f"{ots}:{port}"))}
        for owner, ports in held.items():
            if set(ports) & freed:
                book.unreserve(owner)
