"""What a new leader does with the plans a dead leader left half-done (issue 24): finish or roll back.

Pure: the unfinished plan records (state ``running``, stored with the epoch of the leader that ran them,
the plan itself and each step's state as it completed), what the switches hold now and whether each
record's owner still wants its plan come in; a :class:`Decision` per record goes out, with the plan to
run (a dependency graph of typed steps). Nothing is sent here.

A step counts as applied when the switches show its effect (an added XCON / rule / group is there with
its outputs, a removed one is gone), whatever the record says: a step whose barrier never answered may
have been applied, one recorded done may have been undone since. Conservative: **finish** only when the
owner still wants the plan, no step failed, every step recorded done is still on the switches, the
plan's commit point was reached (traffic is already on the new, verified path: the old leader would
have finished it too) and no remaining step collides with what the switches hold (an XCON to add whose
input port is taken by another XCON); otherwise **roll back** the applied steps. Records of the plan
owners that take over their own state (:data:`LEFT_TO_OWNER`: the reservations, re-adopted from the
database, and the TE loop, ``app/te/takeover.py``) are only closed (``owner``), never replayed.

Exactly once: a record is taken by a leader (:func:`claimable`) unless it ran under this epoch or a
newer one, or a leader of this epoch or a newer one claimed it, or its claim was completed.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.update.model import FlowRule, ModelError
from app.update.plan import ADD, ORDERED, FlowStep, GroupStep, Plan, PlanError, Step, XconStep

RUNNING = "running"  # the state of a plan record while its plan runs
FINISH, ROLLBACK, OWNER = "finish", "rollback", "owner"
STEP_DONE, STEP_FAILED = "done", "failed"
# plan owners (the plan runner's ``kind``) whose state is taken over by themselves, not by replay
LEFT_TO_OWNER = frozenset({"reservations", "te"})
# the ones replayed here: ``POST /plan`` (api), ``POST /circuit`` (circuit), the mapping app (mapping)
HANDLED = frozenset({"api", "circuit", "mapping"})


@dataclass(frozen=True)
class Unfinished:
    """A stored plan record left ``running``: ``plan`` (its JSON), the leader ``epoch`` that ran it
    (None: a single controller), ``steps`` (step id -> done | failed, as they completed), who asked
    (``source``, ``owner``) and any claim (``claimed_epoch``, ``claim_done``)."""

    row: int
    plan: Mapping[str, Any]
    epoch: int | None
    source: str
    owner: str = ""
    steps: Mapping[str, str] = field(default_factory=dict)
    claimed_epoch: int | None = None
    claim_done: bool = False


@dataclass(frozen=True)
class Held:
    """What the switches hold, as read back: ``xcons`` OTS -> ``in_port -> out_port``; ``rules`` packet
    switch -> its rules; ``groups`` switch -> group id -> ports. A node missing was not read back."""

    xcons: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    rules: Mapping[str, Iterable[FlowRule]] = field(default_factory=dict)
    groups: Mapping[str, Mapping[int, Iterable[int]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    """What to do with one record: ``finish`` / ``rollback`` (``plan`` to run), ``owner`` (nothing to
    run: its owner takes over); ``applied`` the step ids found on the switches; ``reason`` why."""

    record: Unfinished
    action: str
    plan: Plan | None
    applied: frozenset[str]
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"row": self.record.row, "plan": self.record.plan.get("id"), "action": self.action,
                "reason": self.reason, "applied": sorted(self.applied),
                "steps": [] if self.plan is None else [s.id for s in self.plan.steps]}


def claimable(record: Unfinished, epoch: int) -> bool:
    """May the leader of ``epoch`` take ``record``? Not one of its own epoch (it runs it itself), not one
    a leader of this epoch or a newer one claimed, not one whose recovery was completed."""
    if record.claim_done or (record.epoch is not None and record.epoch >= epoch):
        return False
    return record.claimed_epoch is None or record.claimed_epoch < epoch


def _visible(step: Step, held: Held) -> bool | None:
    """Is the step's effect on the switches? None: its node was not read back (or it writes nothing)."""
    if isinstance(step, XconStep):
        x = step.xcon
        if x.ots not in held.xcons:
            return None
        present = held.xcons[x.ots].get(x.in_port) == x.out_port
        return present if step.op == ADD else not present
    if isinstance(step, FlowStep):
        if step.rule.switch not in held.rules:
            return None
        rules = list(held.rules[step.rule.switch])
        if step.op == ADD:  # the same entry with the same output (a read-back rule carries no meter / group)
            return any(r.key() == step.rule.key() and r.out_port == step.rule.out_port for r in rules)
        return not any(r.key() == step.rule.key() for r in rules)
    if isinstance(step, GroupStep):
        g = step.group
        if g.switch not in held.groups:
            return None
        ports = held.groups[g.switch].get(g.group_id)
        present = ports is not None and tuple(ports) == tuple(g.ports)
        return present if step.op == ADD else ports is None
    return None


def _collides(step: Step, held: Held) -> bool:
    """Would this remaining step fight what the switches hold (another XCON on its input port, another
    group under its id)?"""
    if isinstance(step, XconStep) and step.op == ADD:
        out = held.xcons.get(step.xcon.ots, {}).get(step.xcon.in_port)
        return out is not None and out != step.xcon.out_port
    if isinstance(step, GroupStep) and step.op == ADD and step.restore is None:
        ports = held.groups.get(step.group.switch, {}).get(step.group.group_id)
        return ports is not None and tuple(ports) != tuple(step.group.ports)
    return False


def _rest(plan: Plan, applied: set[str], done: set[str]) -> Plan:
    """The steps still to run, depending only on each other (what is done is done)."""
    rest = [s for s in plan.steps if s.id not in applied and not (not s.writes and s.id in done)]
    ids = {s.id for s in rest}
    return Plan(tuple(s.with_deps(s.deps & ids) for s in rest), plan.kind, ORDERED, f"{plan.id}-finish")


def decide(record: Unfinished, held: Held, wanted: Callable[[Unfinished], bool]) -> Decision:
    """Finish or roll back one claimed record (see the module's doc for the rule)."""
    try:
        plan = Plan.from_json(record.plan)
    except (PlanError, ModelError, KeyError, TypeError, ValueError) as exc:  # nothing to replay: close it
        return Decision(record, OWNER, None, frozenset(), f"plan record unreadable ({exc})")
    if record.source in LEFT_TO_OWNER:
        return Decision(record, OWNER, None, frozenset(), f"left to its owner ({record.source} takeover)")
    seen = {s.id: _visible(s, held) for s in plan.steps if s.writes}
    unknown = sorted(sid for sid, v in seen.items() if v is None)
    applied = {sid for sid, v in seen.items() if v}
    # a step whose node was not read back: assume it applied (undoing an absent change is harmless)
    applied |= set(unknown)
    done = {sid for sid, st in record.steps.items() if st == STEP_DONE}
    failed = sorted(sid for sid, st in record.steps.items() if st == STEP_FAILED)
    why = ""
    if record.source not in HANDLED:
        why = f"unknown plan owner {record.source!r}"
    elif unknown:
        why = f"switches not read back for {', '.join(unknown)}"
    elif failed:
        why = f"step(s) {', '.join(failed)} failed"
    elif not wanted(record):
        why = f"{record.owner or record.source} no longer wants it"
    elif missing := sorted(sid for sid in done if sid in seen and sid not in applied):
        why = f"step(s) {', '.join(missing)} recorded done but not on the switches"
    elif not plan.commit or not plan.commit <= (applied | done):
        why = "commit point not reached"
    rest = _rest(plan, applied, done)
    if not why and (bad := [s.id for s in rest.steps if _collides(s, held)]):
        why = f"step(s) {', '.join(bad)} collide with what the switches hold"
    if not why:
        return Decision(record, FINISH, rest, frozenset(applied),
                        f"commit point reached; {len(rest.steps)} step(s) left")
    return Decision(record, ROLLBACK, plan.undo(applied), frozenset(applied), why)


def recover(records: Iterable[Unfinished], epoch: int, held: Held,
            wanted: Callable[[Unfinished], bool]) -> list[Decision]:
    """A decision for every record the leader of ``epoch`` may take (:func:`claimable`), oldest first;
    the caller claims each in the database before running its plan (a claim that fails: skip it)."""
    return [decide(r, held, wanted) for r in sorted(records, key=lambda r: r.row) if claimable(r, epoch)]


__all__ = ["FINISH", "HANDLED", "LEFT_TO_OWNER", "OWNER", "ROLLBACK", "RUNNING", "Decision", "Held",
           "Unfinished", "claimable", "decide", "recover"]
