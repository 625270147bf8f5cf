"""``POST /circuit`` as an update plan (plain logic: no os-ken, unit-tested with a fake driver).

A circuit is a chain of bidirectional XCONs. :func:`run_circuit` turns the request into a plan
(:func:`app.update.planner.cross_connect`: hop by hop, each applied before the next, or all at once)
and hands it to the plan runner, whose executor rolls back every hop that went in *or may have gone
in* (its barrier timed out: state unknown) when one is refused or not confirmed. Deleting an XCON
that never came up is harmless (the OTS answers a DELETE_STRICT on a free port with no change and no
error, docs/ots.md).

The plan runs on :class:`DriverXcons`, a southbound that sends the hops through the OTS driver as
the request always did — in parallel mode the hops on one OTS behind one barrier, so that OTS
provisions them as one batch — and keeps the driver's answers for the HTTP body.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.controller.driver_errors import BarrierTimeout, DriverError
from app.update import planner
from app.update.model import FlowRule, GroupSpec, Outcome, Port, XconSpec
from app.update.plan import Plan
from app.update.southbound import Southbound


class XconDriver(Protocol):
    def install(self, ots: str, in_port: int, out_port: int) -> Any: ...

    def remove(self, ots: str, in_port: int) -> Any: ...


class Runner(Protocol):
    """What a circuit needs of :class:`app.controller.plan_runner.PlanRunner`."""

    sleep: Callable[[float], Any]

    def run(self, plan: Plan, owner: str, kind: str, *, southbound: Southbound | None = None) -> Any: ...


@dataclass
class CircuitOutcome:
    """What an all-or-nothing circuit set-up did: ``ok``, or refused (``refused``: an OTS answered with
    OpenFlow errors) / failed (``failure``: an OTS did not answer or is gone), after the roll-back."""

    ok: bool
    body: dict[str, Any]  # xcons, rolled_back, unknown, rollback_failed, error (JSON-able)
    failure: DriverError | None = None

    @property
    def refused(self) -> bool:
        return not self.ok and self.failure is None


def _spec(h: dict) -> XconSpec:
    return XconSpec(str(h["ots"]), h["in_port"], h["out_port"])


def _by_ots(hops: Sequence[dict], driver: Any, parallel: bool) -> list[list[int]]:
    """Hop indices grouped by OTS (first-seen order) in parallel mode when the driver can send one OTS's
    XCONs behind one barrier (``install_many``); else one group per hop. Why: two hops on one OTS sent
    as two barriers are two batches there, i.e. two provisioning delays one after the other."""
    if not parallel or not hasattr(driver, "install_many"):
        return [[i] for i in range(len(hops))]
    groups: dict[str, list[int]] = {}
    for i, h in enumerate(hops):
        groups.setdefault(str(h["ots"]), []).append(i)
    return list(groups.values())


def _outcome(result: Any) -> Outcome:
    """A driver answer (an ``XconResult`` or the :class:`DriverError` it raised) as the executor's Outcome."""
    if isinstance(result, BarrierTimeout):
        return Outcome.timed_out(str(result))
    if isinstance(result, DriverError):
        return Outcome.refused(str(result))
    if not getattr(result, "ok", False):
        return Outcome.refused(f"{result.ots} refused the XCON", errors=result.errors)
    return Outcome.done(result.applied_at, sent_at=result.sent_at)


class DriverXcons:
    """The executor's southbound for one circuit request: XCON adds and removes through the OTS driver,
    each hop's answer kept (``results``, the roll-back's ``rolled`` and ``rollback_failed``)."""

    def __init__(self, driver: Any, hops: Sequence[dict], parallel: bool, sleep: Callable[[float], Any]) -> None:
        self.driver, self.hops, self.sleep = driver, list(hops), sleep
        self.results: list[Any] = [None] * len(hops)  # per hop: XconResult, DriverError, or None (never tried)
        self.index = {_spec(h): i for i, h in enumerate(hops)}
        self.group = {i: g for g in _by_ots(hops, driver, parallel) for i in g}
        self.sent: set[int] = set()  # hops whose group went to the driver (their answer may still be coming)
        self.rolled = 0
        self.rollback_failed: list[dict[str, Any]] = []

    def _send(self, group: list[int]) -> None:
        self.sent.update(group)
        try:
            self._install(group)
        except Exception as exc:  # a bug: the hops of the batch failed (500), and steps waiting on it go on
            for i in group:
                if self.results[i] is None:
                    self.results[i] = DriverError(f"internal error: {exc!r}", 500)
            raise

    def _install(self, group: list[int]) -> None:
        if len(group) == 1:
            h = self.hops[group[0]]
            try:
                self.results[group[0]] = self.driver.install(h["ots"], h["in_port"], h["out_port"])
            except DriverError as exc:  # an OTS that does not answer is a failed hop, not an aborted request
                self.results[group[0]] = exc
            return
        first = self.hops[group[0]]
        try:
            res = self.driver.install_many(first["ots"], [(self.hops[i]["in_port"], self.hops[i]["out_port"])
                                                          for i in group])
        except DriverError as exc:  # the OTS is unknown or gone: every hop of the group failed
            res = [exc] * len(group)
        for i, r in zip(group, res, strict=True):
            self.results[i] = r

    def install_xcon(self, x: XconSpec, barrier: bool = True) -> Outcome:
        i = self.index[x]
        if i not in self.sent:
            self._send(self.group[i])
        while self.results[i] is None:  # another step sent this hop's batch: its barrier is still out
            self.sleep(0.002)
        return _outcome(self.results[i])

    def remove_xcon(self, x: XconSpec, barrier: bool = True) -> Outcome:
        h = self.hops[self.index[x]]
        try:
            res = self.driver.remove(h["ots"], h["in_port"])
        except DriverError as exc:  # stays recorded (applied or unknown) in the driver: GET /xcon shows it
            self.rollback_failed.append({"ots": h["ots"], "in_port": h["in_port"], "error": str(exc)})
            return _outcome(exc)
        if getattr(res, "ok", False):
            self.rolled += 1
        else:
            self.rollback_failed.append({"ots": h["ots"], "in_port": h["in_port"],
                                         "error": "the OTS refused the delete", "errors": getattr(res, "errors", [])})
        return _outcome(res)

    # a circuit plan has XCON steps only
    def install_flow(self, r: FlowRule, barrier: bool = True) -> Outcome:
        return Outcome.refused("a circuit request has no packet rules")

    remove_flow = install_flow

    def wait_ports_up(self, ports: Sequence[Port], stable_s: float, timeout_s: float) -> Outcome:
        return Outcome.refused("a circuit request waits for no ports")

    def wait_link(self, a: Port, b: Port, timeout_s: float) -> Outcome:
        return Outcome.refused("a circuit request waits for no link")

    def flow_packets(self, r: FlowRule) -> int | None:
        return None

    flow_bytes = flow_packets

    def flow_packets_many(self, rules: Sequence[FlowRule]) -> list[int | None]:
        return [None] * len(rules)

    def set_meter(self, switch: str, meter_id: int, kbps: float) -> Outcome:
        return Outcome.refused("a circuit request sets no meters")

    def remove_meter(self, switch: str, meter_id: int) -> Outcome:
        return Outcome.refused("a circuit request sets no meters")

    def set_group(self, g: GroupSpec, barrier: bool = True) -> Outcome:
        return Outcome.refused("a circuit request sets no groups")

    remove_group = set_group

    def outcome(self) -> CircuitOutcome:
        """The HTTP answer: every hop's result, or after a failure what was rolled back and what is unknown."""
        results, hops = self.results, self.hops
        if all(getattr(r, "ok", False) for r in results):
            return CircuitOutcome(True, {"ok": True, "xcons": [r.to_json() for r in results]})
        body: dict[str, Any] = {
            "ok": False,
            "xcons": [r.to_json() for r in results if r is not None and not isinstance(r, DriverError)],
            "rolled_back": self.rolled,
            "unknown": [{"ots": h["ots"], "in_port": h["in_port"], "out_port": h["out_port"]}
                        for h, r in zip(hops, results, strict=True) if isinstance(r, BarrierTimeout)],
        }
        if self.rollback_failed:
            body["rollback_failed"] = self.rollback_failed
        failure = next((r for r in results if isinstance(r, DriverError)), None)
        if failure is not None:  # an OTS that did not answer (no barrier reply, disconnected)
            return CircuitOutcome(False, {**body, "error": str(failure)}, failure)
        return CircuitOutcome(False, body)


def run_circuit(runner: Runner, driver: XconDriver, hops: Sequence[dict], parallel: bool = False) -> CircuitOutcome:
    """Install ``hops`` ``[{"ots", "in_port", "out_port"}]`` all or nothing, as a plan through ``runner``.
    PlanError/ModelError (a hop listed twice, equal ports) before anything is sent."""
    plan = planner.cross_connect([_spec(h) for h in hops], parallel=parallel)
    xcons = DriverXcons(driver, hops, parallel, runner.sleep)
    runner.run(plan, f"circuit:{plan.id}", "circuit", southbound=xcons)
    return xcons.outcome()
