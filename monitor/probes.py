"""Active latency probes per packet link: frames, bookkeeping, control-channel correction, detectors.

Transport (``app/controller/monitor_app.py``): every ``[monitor] probe_interval`` the controller
sends one probe frame (ethertype ``PROBE_ETHERTYPE``) with PACKET_OUT out of one end of each packet
link (circuit); the far switch's trap rule returns it with PACKET_IN. What the controller measures,
``t_in − t_out``, is

    controller→switch A (OpenFlow channel) + A's datapath + the link + B's datapath + B→controller.

The two control-channel legs are estimated with OpenFlow ECHO round trips to each switch (half
the rolling minimum RTT of each switch, :class:`ControlDelay`) and subtracted:
``link_ms = probe_ms − (echo_A + echo_B) / 2``. What is left includes the switches' own
PACKET_OUT / PACKET_IN processing (an echo is answered by the OpenFlow connection, without the
datapath), so the estimate is biased *upwards* by that processing; it is the same for every probe
of a link, so path *changes* (what the seed-001 detector looks for) are not affected.

Each sample feeds the link's :class:`~monitor.latency.PathChangeDetector` (seed 001) and a
:class:`~monitor.latency.RollingMinBaseline`; a change point becomes a ``path_change`` event.
Probes are matched by id through :class:`~monitor.latency.ProbeBook` (timeouts count as losses);
a probe that comes back at a switch port other than the link's far end is ignored and counted.
"""
from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from monitor.latency import ChangePoint, PathChangeDetector, ProbeBook, RollingMinBaseline
from topology.graph import edge_key

T = TypeVar("T")

PROBE_ETHERTYPE = 0x88B5  # IEEE 802 local experimental ethertype 1
PROBE_DST = "02:4d:4c:54:45:50"  # locally administered, no host has it
PROBE_MAGIC = b"MLTEPRB1"
PATH_CHANGE = "path_change"
_FMT = "!8sIQ"  # magic, probe id, send time (ns, monotonic)


def _mac(text: str) -> bytes:
    return bytes(int(x, 16) for x in text.split(":"))


def probe_frame(probe_id: int, sent_ns: int, src_mac: str = "02:00:00:00:00:00") -> bytes:
    """An Ethernet frame carrying the probe id and the send time (padded to 60 bytes)."""
    body = struct.pack(_FMT, PROBE_MAGIC, probe_id & 0xFFFFFFFF, sent_ns & 0xFFFFFFFFFFFFFFFF)
    frame = _mac(PROBE_DST) + _mac(src_mac) + struct.pack("!H", PROBE_ETHERTYPE) + body
    return frame.ljust(60, b"\0")


def parse_probe(frame: bytes) -> tuple[int, int] | None:
    """(probe id, send time ns) of one of our probe frames, else None."""
    n = struct.calcsize(_FMT)
    if len(frame) < 14 + n or struct.unpack_from("!H", frame, 12)[0] != PROBE_ETHERTYPE:
        return None
    magic, pid, sent = struct.unpack_from(_FMT, frame, 14)
    return (pid, sent) if magic == PROBE_MAGIC else None


@dataclass(frozen=True)
class ProbedLink:
    """A packet link probed from ``src`` (switch, port) towards ``dst``; ``id`` is the circuit id."""

    id: str
    src: tuple[str, int]
    dst: tuple[str, int]


def link_id(a: tuple[str, int], b: tuple[str, int]) -> str:
    """The multi-layer graph's id of the packet link between two switch ports (``packet:A:3-B:1``)."""
    return edge_key("packet", f"{a[0]}:{a[1]}", f"{b[0]}:{b[1]}")


def probed_links(directed: Iterable[tuple[str, int, str, int]]) -> dict[str, ProbedLink]:
    """One probe direction per undirected link: from the end named first in its id."""
    out: dict[str, ProbedLink] = {}
    for a, ap, b, bp in directed:
        src, dst = sorted([(a, ap), (b, bp)], key=lambda e: f"{e[0]}:{e[1]}")
        lid = link_id(src, dst)
        out[lid] = ProbedLink(lid, src, dst)
    return out


def rotate(items: Sequence[T], start: int, limit: int | None) -> tuple[list[T], int]:
    """At most ``limit`` of ``items`` from index ``start`` on, wrapping (all of them if ``limit`` is
    None or not smaller), and where the next call starts: a round robin over a list that may change
    between calls (``start`` is taken modulo its length)."""
    if limit is None or limit >= len(items):
        return list(items), 0
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    start %= len(items)
    turn = [items[(start + i) % len(items)] for i in range(limit)]
    return turn, (start + limit) % len(items)


class ControlDelay:
    """One-way controller↔switch delay per switch: half the minimum ECHO RTT of the last ``keep``
    (25 echoes = 5 s at one per probe interval; a minimum, like the detector's, so a slow event
    loop round does not inflate it)."""

    def __init__(self, keep: int = 25) -> None:
        self._rtts: dict[str, deque[float]] = {}
        self.keep = keep

    def add(self, switch: str, rtt_ms: float) -> None:
        self._rtts.setdefault(switch, deque(maxlen=self.keep)).append(rtt_ms)

    def one_way_ms(self, switch: str) -> float | None:
        d = self._rtts.get(switch)
        return min(d) / 2 if d else None


@dataclass
class Sample:
    t: float  # receive time (monotonic s)
    probe_ms: float  # controller → A → link → B → controller
    link_ms: float | None  # probe_ms minus both control-channel legs (None before any echo)


@dataclass
class _LinkState:
    link: ProbedLink
    detector: PathChangeDetector
    baseline: RollingMinBaseline
    recent: deque[Sample]
    interval_min: float | None = None  # minimum link_ms since the last take_minima()
    changes: list[ChangePoint] = field(default_factory=list)
    count: int = 0


@dataclass(frozen=True)
class ProbeResult:
    link: str
    sample: Sample
    changes: tuple[ChangePoint, ...]


class LatencyMonitor:
    """Plain bookkeeping for the probe transport; time always comes in as ``now`` (seconds)."""

    def __init__(self, tolerance_ms: float = 0.5, window: int = 4, stable: int = 3, timeout: float = 2.0,
                 keep: int = 300) -> None:
        self.tol, self.window, self.stable, self.keep = tolerance_ms, window, stable, keep
        self.book = ProbeBook(timeout)
        self.control = ControlDelay()
        self.links: dict[str, _LinkState] = {}
        self._expect: dict[int, tuple[str, tuple[str, int]]] = {}  # probe id -> (link, far end)
        self.misdelivered = 0
        self.retired: dict[str, int] = {}  # link -> probes received before it disappeared
        self._cursor = 0  # where the next limited round starts (send)

    def set_links(self, links: dict[str, ProbedLink]) -> tuple[list[str], list[str]]:
        """The packet links to probe now; returns (added, removed) link ids. A link whose ends
        changed is restarted (new detector: its latency is a different path's)."""
        added, removed = [], []
        for lid in sorted(set(self.links) - set(links)):
            self.retired[lid] = self.links.pop(lid).count
            removed.append(lid)
        for lid, link in sorted(links.items()):
            st = self.links.get(lid)
            if st is not None and st.link == link:
                continue
            self.links[lid] = _LinkState(link, PathChangeDetector(1.0, self.window, self.stable, self.tol),
                                         RollingMinBaseline(20, 1.0, self.tol), deque(maxlen=self.keep))
            added.append(lid)
        return added, removed

    def send(self, now: float, limit: int | None = None) -> list[tuple[ProbedLink, int]]:
        """Probes to send now: (link, probe id) per probed link, or for at most ``limit`` links, the
        next ones after those of the last call (round robin: each link's turn comes every
        ⌈links / limit⌉ calls)."""
        self.book.expire(now)
        out = []
        turn, self._cursor = rotate(sorted(self.links), self._cursor, limit)
        for lid in turn:
            st = self.links[lid]
            pid = self.book.sent(lid, now)
            self._expect[pid] = (lid, st.link.dst)
            out.append((st.link, pid))
        for pid in [p for p in self._expect if not self.book.pending(p)]:
            del self._expect[pid]  # expired (lost)
        return out

    def received(self, probe_id: int, at: tuple[str, int], now: float) -> ProbeResult | None:
        """A probe came back at switch port ``at``; the sample and any path change it completed."""
        exp = self._expect.pop(probe_id, None)
        if exp is None:
            return None
        lid, far = exp
        st = self.links.get(lid)
        if st is None or at != far:
            self.misdelivered += 1
            self.book.cancel(probe_id)
            return None
        got = self.book.received(probe_id, now)
        if got is None:
            return None
        _path, probe_ms = got
        a, b = self.control.one_way_ms(st.link.src[0]), self.control.one_way_ms(st.link.dst[0])
        link_ms = max(0.0, probe_ms - a - b) if a is not None and b is not None else None
        sample = Sample(now, probe_ms, link_ms)
        st.recent.append(sample)
        st.count += 1
        value = link_ms if link_ms is not None else probe_ms
        st.interval_min = value if st.interval_min is None else min(st.interval_min, value)
        changes = tuple(st.detector.add(now, value))
        st.baseline.add(now, value)
        st.changes += changes
        return ProbeResult(lid, sample, changes)

    def take_minima(self) -> dict[str, float]:
        """Minimum latency per link since the previous call (one row per link and interval for the DB)."""
        out = {}
        for lid, st in self.links.items():
            if st.interval_min is not None:
                out[lid] = st.interval_min
                st.interval_min = None
        return out

    def snapshot(self, samples: int = 20) -> dict[str, Any]:
        """For the API: per link its ends, counts, last and minimum latencies, detector state."""
        out: dict[str, Any] = {}
        for lid, st in sorted(self.links.items()):
            recent = list(st.recent)
            lat = [s.link_ms if s.link_ms is not None else s.probe_ms for s in recent]
            out[lid] = {
                "src": {"node": st.link.src[0], "port": st.link.src[1]},
                "dst": {"node": st.link.dst[0], "port": st.link.dst[1]},
                "received": st.count,
                "lost": self.book.lost.get(lid, 0),
                "loss_rate": round(self.book.loss_rate(lid), 4),
                "last_ms": round(lat[-1], 4) if lat else None,
                "min_ms": round(min(lat), 4) if lat else None,
                "base_ms": st.detector.base,
                "rolling_min_ms": st.baseline.base,
                "control_ms": {st.link.src[0]: self.control.one_way_ms(st.link.src[0]),
                               st.link.dst[0]: self.control.one_way_ms(st.link.dst[0])},
                "changes": [{"t": c.t, "old_ms": c.old_ms, "new_ms": c.new_ms} for c in st.changes[-10:]],
                "samples": [{"t": round(s.t, 4), "probe_ms": round(s.probe_ms, 4),
                             "link_ms": None if s.link_ms is None else round(s.link_ms, 4)}
                            for s in recent[-samples:]] if samples > 0 else [],
            }
        return out
