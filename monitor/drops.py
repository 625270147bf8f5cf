"""A drop signal that is real on userspace OVS: a shaped OVS QoS queue with a *bounded* leaf qdisc.

Measured (docs/monitor.md): on a ``datapath=user`` bridge, packets above an HTB-shaped rate are
lost at OVS's AF_PACKET socket (EAGAIN, only logged), and tc, OVS interface stats and host counters
all stay at 0 drops, because the socket's send buffer fills before HTB's default leaf queue
(``txqueuelen`` = 1000 packets) does. Putting a short ``pfifo`` under the OVS-created HTB class
makes the queue overflow first, so the kernel counts every drop in the class statistics, and OVS
reports that counter as ``tx_errors`` in OpenFlow queue statistics (OFPMP_QUEUE / OFPST_QUEUE) —
a switch-reported drop count the controller polls next to PORT_STATS.

:class:`OvsShapedQueue` builds and removes that configuration; :func:`parse_tc_qdisc_json` reads
the same counters host-side from ``tc -s -j qdisc show`` (used by the lab and the CLI).
"""
from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from monitor.ovsdb_sflow import OvsdbError, run_vsctl

Runner = Callable[[Sequence[str]], str]


def run_cmd(args: Sequence[str]) -> str:
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=20)
    if proc.returncode != 0:
        raise OvsdbError(f"{' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


@dataclass(frozen=True)
class QueueDrops:
    """Counters of one egress queue (OpenFlow queue stats or tc class stats)."""

    port: str
    queue: int
    tx_packets: int
    tx_bytes: int
    dropped: int


class OvsShapedQueue:
    """Shape an OVS port to ``max_rate`` bit/s with a linux-htb QoS whose queue 0 has a bounded leaf.

    ``limit`` is the leaf queue length in packets (must be small enough to fill before the OVS
    socket buffer: 16–64 packets). Queue 0 is HTB class ``1:1``, the class OVS sends untagged
    traffic to, so no flow rule needs ``set_queue``.
    """

    LEAF_HANDLE = "10:"

    def __init__(self, vsctl: Runner = run_vsctl, cmd: Runner = run_cmd) -> None:
        self.vsctl, self.cmd = vsctl, cmd

    def apply(self, port: str, max_rate: int, limit: int = 32) -> None:
        if max_rate <= 0 or limit <= 0:
            raise ValueError("max_rate and limit must be > 0")
        self.vsctl(["--", "set", "port", port, "qos=@q",
                    "--", "--id=@q", "create", "qos", "type=linux-htb", f"other-config:max-rate={max_rate}",
                    f"external-ids:mlte-shaped={port}", "queues:0=@q0",
                    "--", "--id=@q0", "create", "queue", f"other-config:max-rate={max_rate}",
                    f"external-ids:mlte-shaped={port}"])
        self.cmd(["tc", "qdisc", "replace", "dev", port, "parent", "1:1", "handle", self.LEAF_HANDLE,
                  "pfifo", "limit", str(limit)])

    def remove(self, port: str) -> None:
        """Clear the port's QoS and destroy the QoS/Queue rows we created (they are OVSDB roots)."""
        self.vsctl(["--if-exists", "clear", "port", port, "qos"])
        for table in ("qos", "queue"):
            out = self.vsctl(["--format=json", "--columns=_uuid", "find", table, f"external-ids:mlte-shaped={port}"])
            for row in json.loads(out)["data"]:
                self.vsctl(["--if-exists", "destroy", table, row[0][1]])

    def tc_drops(self, port: str) -> QueueDrops:
        """The bounded leaf's counters read host-side (equal to the switch's queue tx_errors)."""
        out = self.cmd(["tc", "-s", "-j", "qdisc", "show", "dev", port])
        for q in parse_tc_qdisc_json(out):
            if q.get("handle") == self.LEAF_HANDLE:
                return QueueDrops(port, 0, int(q.get("packets", 0)), int(q.get("bytes", 0)), int(q.get("drops", 0)))
        raise OvsdbError(f"{port}: no bounded leaf qdisc {self.LEAF_HANDLE} (is the queue applied?)")


def parse_tc_qdisc_json(text: str) -> list[dict]:
    """``tc -s -j qdisc show`` output → list of qdisc dicts (``kind``, ``handle``, ``drops``, ...)."""
    try:
        data = json.loads(text or "[]")
    except json.JSONDecodeError:
        return []
    return [d for d in data if isinstance(d, dict)]
