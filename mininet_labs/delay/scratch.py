"""Two namespaces joined by a veth pair, removed however the block ends: the bench's and test's network.

No OVS, no Mininet: ``ip netns`` + veth only, every name prefixed ``dly`` so nothing collides with
a lab. ``dly<tag>A`` holds ``dly<tag>0`` (10.77.0.1/24), ``dly<tag>B`` holds ``dly<tag>1`` (10.77.0.2/24).
"""
from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

from mininet_labs.delay.netns import ROOT, Netns

ADDR_A, ADDR_B = "10.77.0.1", "10.77.0.2"


@dataclass(frozen=True)
class ScratchPair:
    a: Netns
    b: Netns
    a_if: str
    b_if: str
    a_ip: str = ADDR_A
    b_ip: str = ADDR_B


def dly_namespaces() -> set[str]:
    """The ``dly*`` namespaces on the machine now (what a clean-up check compares)."""
    out = ROOT.run("ip", "netns", "list").stdout
    return {line.split()[0] for line in out.splitlines() if line.startswith("dly")}


@contextlib.contextmanager
def scratch_pair(tag: str) -> Iterator[ScratchPair]:
    """Namespaces ``dly<tag>A``/``dly<tag>B`` and their veth; deleted on exit (even on an exception)."""
    if not re.fullmatch(r"[a-z0-9]{1,8}", tag):
        raise ValueError(f"tag must be 1-8 of a-z 0-9, not {tag!r}")
    pair = ScratchPair(Netns(f"dly{tag}A"), Netns(f"dly{tag}B"), f"dly{tag}0", f"dly{tag}1")
    names = (pair.a.name, pair.b.name)
    try:
        for name in names:
            ROOT.run("ip", "netns", "del", name, check=False)  # a leftover of a killed run
            ROOT.run("ip", "netns", "add", name)
        ROOT.run("ip", "link", "add", pair.a_if, "netns", pair.a.target(), "type", "veth",
                 "peer", "name", pair.b_if, "netns", pair.b.target())
        for ns, ifname, ip in ((pair.a, pair.a_if, ADDR_A), (pair.b, pair.b_if, ADDR_B)):
            ns.run("ip", "addr", "add", f"{ip}/24", "dev", ifname)
            ns.run("ip", "link", "set", "dev", ifname, "up")
            ns.run("ip", "link", "set", "dev", "lo", "up")
        yield pair
    finally:
        for name in names:
            ROOT.run("ip", "netns", "del", name, check=False)
