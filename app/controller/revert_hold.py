"""When a restored reservation may go back to its original path (plain logic, no os-ken).

A revert waits until the original path has been clear of faults for ``[controller] revert_hold_s``
without a break (the wait-to-restore time of SONET/SDH revertive switching, ITU-T G.808.1): every
look at the network (each port change, each pass of the reservations loop) reports per reservation
whether its original path is clear, and any fault seen restarts the hold, so a flapping fibre never
pulls traffic back. A revert that did not happen (the path taken, booked, or its plan rolled back)
waits the hold again, doubled per failure up to :data:`BACKOFF_MAX`.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

BACKOFF_MAX = 600.0  # s: the longest wait between two revert tries of one reservation


@dataclass
class RevertHold:
    """The hold timers of the reservations that run on a restoration path."""

    hold_s: float
    clear_since: dict[int, float] = field(default_factory=dict)  # original path clear without a break since
    not_before: dict[int, float] = field(default_factory=dict)  # after a failed try: the next one
    failed: dict[int, int] = field(default_factory=dict)  # failed tries in a row

    def observe(self, res_id: int, clear: bool, now: float) -> None:
        """The original path of ``res_id`` is ``clear`` (no fault on it) at ``now``; a fault restarts the hold."""
        if clear:
            self.clear_since.setdefault(res_id, now)
        else:
            self.clear_since.pop(res_id, None)

    def keep(self, ids: Iterable[int]) -> None:
        """Forget every reservation but ``ids`` (reverted, released, or no longer restored)."""
        ids = set(ids)
        for table in (self.clear_since, self.not_before, self.failed):
            for k in [k for k in table if k not in ids]:
                del table[k]

    def due_at(self, res_id: int) -> float | None:
        """When ``res_id`` may be reverted (None: its original path is not clear)."""
        since = self.clear_since.get(res_id)
        if since is None:
            return None
        return max(since + self.hold_s, self.not_before.get(res_id, 0.0))

    def due(self, now: float) -> list[int]:
        """The reservations whose hold is over at ``now``."""
        return sorted(i for i in self.clear_since if (at := self.due_at(i)) is not None and at <= now)

    def tried(self, res_id: int, ok: bool, now: float) -> None:
        """A revert of ``res_id`` ended: done (forgotten), or not (the hold again, doubled per failure)."""
        if ok:
            for table in (self.clear_since, self.not_before, self.failed):
                table.pop(res_id, None)
            return
        n = self.failed[res_id] = self.failed.get(res_id, 0) + 1
        self.not_before[res_id] = now + min(BACKOFF_MAX, max(self.hold_s, 1.0) * 2 ** (n - 1))

    def to_json(self) -> dict[str, dict[str, float | int | None]]:
        return {str(i): {"clear_since": since, "due_at": self.due_at(i), "failed": self.failed.get(i, 0)}
                for i, since in sorted(self.clear_since.items())}
