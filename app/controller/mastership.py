"""Whether this controller may change the network, and under which epoch (several controllers).

One controller (no ``[ha] etcd``) is always master: nothing changes for it. With several, an election
(``app.ha.election``, etcd) names one leader with a monotonic ``epoch``; this object is the one answer
every part of the controller asks before it acts:

- :meth:`Mastership.is_master` is the southbound's gate (``OpenFlowSouthbound.gate``): while it is
  False no message that changes a switch leaves, whatever app tries.
- Apps that decide on their own (forwarding, LLDP, the monitor's probes, reservations, the TE loop,
  the DB feed) call :meth:`Mastership.acting` first and stay quiet as followers: their view stays warm
  from PORT_STATUS, read-only requests and the database.
- It is False at once when the lease's local deadline passed (``Election.is_leader``: a controller
  frozen by SIGSTOP that wakes up stops before any round trip), when the election deposed us, or
  when a switch reported a newer generation than ours (a stale ROLE_REQUEST).

The role messages every switch gets (MASTER with ``generation_id = epoch`` from the leader, SLAVE from
the others) are built here as values: OF1.3 ``OFPRoleRequest`` for packet switches, the Nicira role
request with mlte's generation extension for OF1.0 OTS agents (docs/ots.md).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.controller import ofmsg

SINGLE = "single"
ELECTED = "elected"
CONTEXT = "mlte_mastership"

#: OF1.3 ROLE_REQUEST / OF1.0 Nicira role codes by name
OF13_VERSION = 4


@dataclass(frozen=True)
class Change:
    """A mastership transition, handed to listeners (the app broadcasts it as an os-ken event)."""

    master: bool
    epoch: int | None
    reason: str


class Mastership:
    """This controller's standing: single (always master) or elected (master while its lease holds)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.mode = SINGLE
        self.clock = clock
        self.epoch: int | None = None  # ours, while leader
        self.highest_seen = 0  # the highest epoch any switch or the election showed us
        self.reason = "single controller"
        self._lease_ok: Callable[[float], bool] = lambda _now: True
        self._leader = False
        self._listeners: list[Callable[[Change], None]] = []
        self.transitions = 0

    # ---- who asks ------------------------------------------------------------------------------------
    def is_master(self) -> bool:
        """May this controller change a switch now? (The southbound's gate.)"""
        if self.mode == SINGLE:
            return True
        return (self._leader and self.epoch is not None and self.highest_seen <= self.epoch
                and self._lease_ok(self.clock()))

    def acting(self) -> bool:
        """Should an app take decisions now (the same answer; a follower keeps its view warm only)."""
        return self.is_master()

    def role(self) -> str:
        return "master" if self.is_master() else "slave"

    def generation(self) -> int:
        """The generation id our role requests carry: our epoch as leader, else the newest we saw."""
        return self.epoch if self.is_master() and self.epoch is not None else self.highest_seen

    def subscribe(self, fn: Callable[[Change], None]) -> None:
        self._listeners.append(fn)

    # ---- the election drives these ------------------------------------------------------------------
    def elected_mode(self, lease_ok: Callable[[float], bool]) -> None:
        """Several controllers: master only between :meth:`elected` and :meth:`deposed`, and only while
        ``lease_ok(monotonic now)`` (the election's local lease deadline)."""
        self.mode = ELECTED
        self._lease_ok = lease_ok
        self._leader = False
        self.reason = "follower: no lease yet"

    def elected(self, epoch: int) -> None:
        if epoch < self.highest_seen:
            self.deposed(f"elected with epoch {epoch} but epoch {self.highest_seen} exists")
            return
        self.epoch, self.highest_seen, self._leader = epoch, epoch, True
        self.reason = f"leader (epoch {epoch})"
        self._announce(Change(True, epoch, self.reason))

    def deposed(self, reason: str) -> None:
        was = self._leader
        self._leader = False
        self.reason = f"follower: {reason}"
        if was:
            self._announce(Change(False, self.epoch, reason))

    def saw_epoch(self, epoch: int, source: str) -> None:
        """A newer epoch exists (a switch refused our generation as stale, or the election showed it):
        stop at once."""
        if epoch > self.highest_seen:
            self.highest_seen = epoch
        if self._leader and self.epoch is not None and epoch > self.epoch:
            self.deposed(f"{source} shows a newer epoch {epoch} than ours ({self.epoch})")

    def _announce(self, change: Change) -> None:
        self.transitions += 1
        for fn in list(self._listeners):
            fn(change)

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "master": self.is_master(), "epoch": self.epoch,
                "highest_seen": self.highest_seen, "reason": self.reason, "transitions": self.transitions}


def role_messages(ofp_version: int, role: str, generation: int) -> list[Any]:
    """The role request for one switch: OF1.3 ROLE_REQUEST, or for an OF1.0 OTS the Nicira one."""
    if ofp_version == OF13_VERSION:
        return [ofmsg.role_request(role, generation)]
    return [ofmsg.nx_role_request(role, generation)]
