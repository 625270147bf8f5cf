"""Rates from a rule's byte counter that the switch refreshes only now and then.

Userspace Open vSwitch copies its datapath flows' statistics into the OpenFlow rules every
``other_config:max-revalidator`` ms (500 by default): between refreshes a flow-stats reply repeats
the last refreshed byte count while the rule's duration runs on. Two replies 0.5–0.6 s apart then hold
zero, one or two refresh steps, and Δbytes / Δduration reads 0, 1× or 2× the flow's rate: a named
elephant read at 0 Mbit/s was taken by the TE loop for a flow that had ended (and never moved), and
one read at 2× made the offload gain wait for twice the bytes.

So a rate here is taken between **refresh steps**, not between replies: a reply whose byte count
differs from the previous reply's saw a refresh that happened after that reply and at most
``refresh`` s before itself; the step is placed in the middle of that span, on the rule's own clock
(the rule's install, 0 bytes at duration 0, is an exact step). The rate is Δbytes / Δtime between the
newest step and the oldest one kept within ``window`` s of it, so a step's placement error (at most
half of that span: 0.05 s for replies 0.1 s apart, ``refresh`` / 2 for slower ones) weighs little;
while the install is still that oldest step, the newest count is taken at the reply that first
showed it (the average since install: a lower bound, never the high side of the error).
A reply with the same count is no news — until ``stall`` s of them (longer than the refresh period):
then a refresh must have found no new bytes, and that is a step with the same count (the flow slowed
or stopped; its rate falls to 0 within ``window`` + ``stall`` s). ``refresh`` = 0: counters fresh at
every reply (each reply a step at its own time, the plain Δbytes / Δduration).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RefreshSteps:
    """One rule's counter. ``min_span``: a rate needs its two steps at least this far apart (a young
    rule's first bytes over a few milliseconds explode). ``refresh``: the switch's refresh period (at
    most); ``stall``: replies without a change for this long make a no-change step (> ``refresh``)."""

    min_span: float = 0.2
    window: float = 1.0
    refresh: float = 0.5
    stall: float = 1.0
    steps: list[tuple[float, int]] = field(default_factory=lambda: [(0.0, 0)])  # (rule clock s, bytes)
    last: tuple[float, int] | None = None  # the previous reply: (duration, bytes)
    changed_at: float = 0.0  # duration of the reply that last brought news (a step)
    rate: float | None = None  # bytes/s (None: no rate yet)

    def sample(self, byte_count: int, duration: float) -> bool:
        """One reply's (byte_count, duration). True if it brought news: a new step (and with it, once the
        steps span ``min_span``, a new rate)."""
        if self.last is not None and (duration < self.last[0] or byte_count < self.last[1]):
            self.steps, self.last, self.changed_at, self.rate = [(0.0, 0)], None, 0.0, None  # the rule was re-added
        prev, self.last = self.last, (duration, byte_count)
        # the count shown was refreshed after the previous reply and at most one refresh period ago
        since = max(prev[0] if prev is not None else 0.0, duration - self.refresh)
        if byte_count != (prev[1] if prev is not None else 0):
            self.steps.append(((since + duration) / 2, byte_count))
        elif prev is not None and duration - self.changed_at >= self.stall and since > self.steps[-1][0]:
            self.steps.append(((since + duration) / 2, byte_count))  # a refresh came and found no new bytes
        else:
            return False
        self.changed_at = duration
        newest = self.steps[-1][0]
        while len(self.steps) > 2 and self.steps[1][0] <= newest - self.window:
            self.steps.pop(0)
        t0, b0 = self.steps[0]
        # a young rule (its install still the reference, within ``window``): the count as of the reply
        # that first showed it, i.e. its average since install — a lower bound, by at most the step's
        # placement error; a step placed in the middle of its span could read a young flow 20-50 % high
        # (early naming at 0.3-0.6 s of counting), and the TE loop's gain keeps the highest rate shown
        end = duration if (t0, b0) == (0.0, 0) else newest
        if end - t0 >= self.min_span:
            self.rate = (byte_count - b0) / (end - t0)
        return True

    @property
    def counted_s(self) -> float:
        """Seconds of the rule's clock the newest step stands for: the span of the average since counted."""
        return self.steps[-1][0]
