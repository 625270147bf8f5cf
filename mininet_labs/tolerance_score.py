"""Measured flows scored against their OTTER tolerance classes (lab ``placement-compare``).

Why: OTTER places flows by how well a path suits each flow's tolerance of RTT, jitter and loss
(:mod:`pce.otter.graph_flows` classes, :mod:`pce.otter.demand` shapes). To compare placement
policies on a real network the same functions are applied to what each flow *measured*: a flow's
value is the mean of its class's tolerance functions over the metrics the class cares about and
the lab measured; it is *inside* its tolerance when every one of them is at its breakpoint or
better (value 1). A metric the lab did not measure for a flow is left out and listed. The
tolerance-weighted allocation of a set of flows is Σ bytes delivered × value.
"""
from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pce.otter.demand import SHAPES, tolerance
from pce.otter.graph_flows import FlowClass


@dataclass
class MeasuredFlow:
    """One flow (or ``count`` flows that share one measurement) over the measured window."""

    name: str
    cls: FlowClass
    bytes: int
    seconds: float
    rtt_ms: float | None = None
    jitter_ms: float | None = None
    loss: float | None = None  # a rate: 1e-2 = 1 %
    count: int = 1
    notes: list[str] = field(default_factory=list)

    @property
    def mbps(self) -> float:
        return self.bytes * 8 / 1e6 / self.seconds if self.seconds > 0 else 0.0


def metric_values(flow: MeasuredFlow) -> dict[str, float]:
    """metric → tolerance value in (0, 1] for each metric the class cares about and the lab measured."""
    out = {}
    for metric, tol, sigma in zip(("rtt", "jitter", "loss"), flow.cls.tolerances(),
                                  (flow.rtt_ms, flow.jitter_ms, flow.loss), strict=True):
        if tol is not None and sigma is not None:
            out[metric] = float(tolerance(SHAPES[tol[0]], tol[1], sigma))
    return out


def score(flow: MeasuredFlow) -> dict[str, Any]:
    """The flow's value, whether it is inside its tolerance, and its tolerance-weighted bytes."""
    vals = metric_values(flow)
    value = statistics.fmean(vals.values()) if vals else 1.0
    unmeasured = [m for m, tol, sigma in zip(("rtt", "jitter", "loss"), flow.cls.tolerances(),
                                             (flow.rtt_ms, flow.jitter_ms, flow.loss), strict=True)
                  if tol is not None and sigma is None]
    return {"flow": flow.name, "class": flow.cls.name, "flows": flow.count, "bytes": flow.bytes,
            "mbps": round(flow.mbps, 4), "rtt_ms": flow.rtt_ms, "jitter_ms": flow.jitter_ms, "loss": flow.loss,
            "values": {m: round(v, 4) for m, v in vals.items()}, "value": round(value, 4),
            "inside": all(v >= 1.0 for v in vals.values()), "weighted_bytes": round(flow.bytes * value),
            "unmeasured": unmeasured, "notes": flow.notes}


def summarise(flows: Iterable[MeasuredFlow]) -> dict[str, Any]:
    """Per flow scores plus the totals a policy is compared on."""
    scored = [score(f) for f in flows]
    n = sum(s["flows"] for s in scored)
    inside = sum(s["flows"] for s in scored if s["inside"])
    total = sum(s["bytes"] for s in scored)
    weighted = sum(s["weighted_bytes"] for s in scored)
    return {"flows": scored, "allocated_bytes": total, "weighted_bytes": weighted,
            "weighted_share": round(weighted / total, 4) if total else 0.0,
            "flows_total": n, "flows_inside": inside, "inside_fraction": round(inside / n, 4) if n else 0.0}


def probe_stats(probe: Mapping[str, Any], a: float, b: float) -> dict[str, Any]:
    """RTT (p50, p95), jitter (mean |ΔRTT| of consecutive answered probes, RFC 3550 style), loss and
    delivered bytes of the probes sent in wall-clock window [a, b)."""
    rtt = probe.get("rtt_ms", {})
    sent = [(int(s), t) for s, t in probe.get("sent", []) if a <= t < b]
    got = [rtt[str(s)] for s, _t in sent if str(s) in rtt]
    out: dict[str, Any] = {"sent": len(sent), "answered": len(got),
                           "loss": round(1 - len(got) / len(sent), 5) if sent else None,
                           "bytes": len(got) * int(probe.get("size", 0))}
    if got:
        q = sorted(got)
        out["rtt_p50_ms"] = round(statistics.median(q), 3)
        out["rtt_p95_ms"] = round(q[min(len(q) - 1, int(0.95 * len(q)))], 3)
        out["rtt_max_ms"] = round(q[-1], 3)
        diffs = [abs(y - x) for x, y in zip(got, got[1:], strict=False)]
        out["jitter_ms"] = round(statistics.fmean(diffs), 3) if diffs else 0.0
    return out


def sink_stats(sink: Mapping[str, Any], a: float, b: float) -> dict[str, Any]:
    """Bytes and loss of a sequence-numbered flow in [a, b) (seconds from the sink's t0, bin edges):
    loss = 1 − packets received / (highest − lowest sequence number seen + 1)."""
    width = float(sink["bin_s"])
    got = [v for k, v in sink["bins"].items() if a - 1e-9 <= int(k) * width < b - 1e-9]
    if not got:
        return {"bytes": 0, "packets": 0, "loss": None}
    span = max(v[2] for v in got) - min(v[1] for v in got) + 1
    packets = sum(v[3] for v in got)
    return {"bytes": sum(v[0] for v in got), "packets": packets, "loss": round(max(0.0, 1 - packets / span), 5)}
