"""All-or-nothing circuit set-up over the OTS driver (plain logic: no os-ken, unit-tested with a fake).

A circuit is a chain of bidirectional XCONs. Hop by hop (or all at once: then the hops on one OTS go
behind one barrier, so that OTS provisions them as one batch), each confirmed by a barrier; if any hop is refused or not confirmed, every hop that went in *or may have gone in* (its
barrier timed out: state unknown) is deleted again. Deleting an XCON that never came up is harmless
(the OTS answers a DELETE_STRICT on a free port with no change and no error, docs/ots.md).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.controller.driver_errors import BarrierTimeout, DriverError


class XconDriver(Protocol):
    def install(self, ots: str, in_port: int, out_port: int) -> Any: ...

    def remove(self, ots: str, in_port: int) -> Any: ...


Runner = Callable[[list[Callable[[], None]]], None]  # runs thunks concurrently and waits for all


def _in_sequence(thunks: list[Callable[[], None]]) -> None:
    for t in thunks:
        t()


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


def _by_ots(hops: Sequence[dict], driver: Any) -> list[list[int]]:
    """Hop indices grouped by OTS (first-seen order) when the driver can send one OTS's XCONs behind
    one barrier (``install_many``); else one group per hop. Why: two hops on one OTS sent as two
    barriers are two batches there, i.e. two provisioning delays one after the other."""
    if not hasattr(driver, "install_many"):
        return [[i] for i in range(len(hops))]
    groups: dict[str, list[int]] = {}
    for i, h in enumerate(hops):
        groups.setdefault(str(h["ots"]), []).append(i)
    return list(groups.values())


def _job(driver: Any, hops: Sequence[dict], group: list[int], outcomes: list[Any],
         install: Callable[[dict], Any]) -> Callable[[], None]:
    """A thunk installing the hops ``group`` (indices into ``hops``) and storing each outcome."""

    def run() -> None:
        if len(group) == 1:
            outcomes[group[0]] = install(hops[group[0]])
            return
        try:
            res = driver.install_many(hops[group[0]]["ots"], [(hops[i]["in_port"], hops[i]["out_port"])
                                                               for i in group])
        except DriverError as exc:  # the OTS is unknown or gone: every hop of the group failed
            res = [exc] * len(group)
        for i, r in zip(group, res, strict=True):
            outcomes[i] = r
    return run


def setup_circuit(driver: XconDriver, hops: Sequence[dict], parallel: bool = False,
                  run_all: Runner = _in_sequence) -> CircuitOutcome:
    """Install ``hops`` ``[{"ots", "in_port", "out_port"}]`` all or nothing."""

    def install(h: dict) -> Any:  # an OTS that does not answer is a failed hop, not an aborted request
        try:
            return driver.install(h["ots"], h["in_port"], h["out_port"])
        except DriverError as exc:
            return exc

    outcomes: list[Any] = [None] * len(hops)
    if parallel:  # every hop at once: one provisioning delay instead of one per hop
        jobs = [_job(driver, hops, group, outcomes, install) for group in _by_ots(hops, driver)]
        run_all(jobs)
    else:  # hop by hop, each applied before the next
        for i, h in enumerate(hops):
            outcomes[i] = install(h)
            if not getattr(outcomes[i], "ok", False):
                break
    if all(getattr(r, "ok", False) for r in outcomes):
        return CircuitOutcome(True, {"ok": True, "xcons": [r.to_json() for r in outcomes]})
    # roll back: applied hops and hops in an unknown state (barrier timed out), last first
    undo = [(h, r) for h, r in zip(hops, outcomes, strict=True)
            if getattr(r, "ok", False) or isinstance(r, BarrierTimeout)]
    rolled, failed = 0, []
    for h, _r in reversed(undo):
        try:
            res = driver.remove(h["ots"], h["in_port"])
        except DriverError as exc:  # stays recorded (applied or unknown) in the driver: GET /xcon shows it
            failed.append({"ots": h["ots"], "in_port": h["in_port"], "error": str(exc)})
            continue
        if getattr(res, "ok", False):
            rolled += 1
        else:
            failed.append({"ots": h["ots"], "in_port": h["in_port"], "error": "the OTS refused the delete",
                           "errors": getattr(res, "errors", [])})
    body: dict[str, Any] = {
        "ok": False,
        "xcons": [r.to_json() for r in outcomes if r is not None and not isinstance(r, DriverError)],
        "rolled_back": rolled,
        "unknown": [{"ots": h["ots"], "in_port": h["in_port"], "out_port": h["out_port"]}
                    for h, r in zip(hops, outcomes, strict=True) if isinstance(r, BarrierTimeout)],
    }
    if failed:
        body["rollback_failed"] = failed
    failure = next((r for r in outcomes if isinstance(r, DriverError)), None)
    if failure is not None:  # an OTS that did not answer (no barrier reply, disconnected)
        return CircuitOutcome(False, {**body, "error": str(failure)}, failure)
    return CircuitOutcome(False, body)
