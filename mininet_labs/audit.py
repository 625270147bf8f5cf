"""What the switches of a several-controller lab hold, read from OVS itself, checked against the leader.

The failover lab and the soak (``mininet_labs/controller_failover.py``, ``mininet_labs/soak.py``) ask the
same questions after a takeover: which XCONs are on the OTS bridges, which reservation and TE (``steer``)
rules on the packet switches, which TE records in the shared database, and does the leader's view of the
lit reservations explain all of it (nothing orphaned, nothing twice). ``ha`` is a running
:class:`mininet_labs.ha_session.HaSession` (anything with ``spec`` and ``lab.bridge(name)``).
"""
from __future__ import annotations

import re
import subprocess
from collections import Counter
from collections.abc import Callable
from typing import Any

from app.controller.client import wait_until
from topology import rule_plan

_XCON = re.compile(r"in_port=(\d+).*actions=output:(\d+)")
_COOKIE = re.compile(r"cookie=(0x[0-9a-f]+)")
_PACKETS = re.compile(r"n_packets=(\d+)")


def _dump(ha: Any, name: str, *args: str) -> str:
    return subprocess.run(["ovs-ofctl", *args, "--no-names", "dump-flows", ha.lab.bridge(name)], capture_output=True,
                          text=True, timeout=10, check=True).stdout


def _match(line: str) -> str:
    """A dump-flows line's match fields without the priority."""
    fields = line.split(" actions=")[0].split()[-1]
    return ",".join(f for f in fields.split(",") if not f.startswith("priority="))


def bridge_xcons(ha: Any) -> list[tuple[str, int, int]]:
    """(OTS, in_port, out_port) of every XCON flow on the OTS bridges (what the hardware holds)."""
    out = []
    for o in ha.spec.ots:
        for line in _dump(ha, o.name).splitlines():
            m = _XCON.search(line)
            if m and "priority=0 " not in line:
                out.append((o.name, int(m.group(1)), int(m.group(2))))
    return out


def band_packets(ha: Any, switch: str, band: Any) -> list[tuple[str, int]]:
    """(match without priority, packets counted) of every rule of one ``rule_plan`` band on ``switch``."""
    out = []
    for line in _dump(ha, switch, "-O", "OpenFlow13").splitlines():
        c, n = _COOKIE.search(line), _PACKETS.search(line)
        if c is not None and n is not None and band.owns(int(c.group(1), 16)):
            out.append((_match(line), int(n.group(1))))
    return out


def band_rules(ha: Any, band: Any) -> list[tuple[str, int, str]]:
    """(switch, id in the cookie, match without priority) of every rule of one ``rule_plan`` band on the
    packet switches."""
    out = []
    for sw in ha.spec.switches:
        for line in _dump(ha, sw.name, "-O", "OpenFlow13").splitlines():
            c = _COOKIE.search(line)
            if c is None or not band.owns(int(c.group(1), 16)):
                continue
            out.append((sw.name, rule_plan.cookie_id(int(c.group(1), 16)), _match(line)))
    return out


def reservation_rules(ha: Any) -> list[tuple[str, int, str]]:
    """The reservation band's rules on the packet switches (:func:`band_rules`)."""
    return band_rules(ha, rule_plan.RESERVATION)


def steer_rules(ha: Any) -> list[tuple[str, int, str]]:
    """The TE loop's ``steer`` rules (an offloaded elephant's 5-tuple) on the packet switches."""
    return band_rules(ha, rule_plan.STEER)


def duplicates(rules: list[tuple[str, int, str]]) -> list[str]:
    """Rules that are on one switch twice with one match (two cookies for one flow: lit twice)."""
    by_match = Counter((sw, m) for sw, _i, m in rules)
    return sorted(f"{sw}:{m}" for (sw, m), n in by_match.items() if n > 1)


def te_records(db_url: str) -> list[dict[str, Any]]:
    """The TE loop's records in the shared database (``te_records``: kind, ident, state, epoch)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT kind, ident, state, epoch FROM te_records ORDER BY kind, ident")).all()
    finally:
        engine.dispose()
    return [{"kind": str(k), "ident": int(i), "state": str(s), "epoch": None if e is None else int(e)}
            for k, i, s, e in rows]


def within(cond: Callable[[], Any], timeout: float) -> Any:
    """``cond``'s first truthy answer within ``timeout`` seconds, or None (the labs record a miss)."""
    try:
        return wait_until(cond, timeout, "condition")
    except TimeoutError:
        return None


def sees_all(member: Any, switches: int) -> bool | None:
    """Every switch is connected to ``member`` (OTS capabilities known): it could take over now."""
    sws = member.client.switches()
    return len([s for s in sws if s["kind"] == "packet" or s["capabilities"]]) >= switches or None


def audit(ha: Any, leader: Any, ours: set[int]) -> dict[str, Any]:
    """The switches against what the leader says is lit: an XCON or reservation rule of no lit
    reservation is an orphan; one lit twice (two records, or two rules of one match) a duplicate."""
    lit = leader.client.request("GET", "/reservations", timeout=10).get("lit", {})
    owners: Counter[tuple[str, int]] = Counter()
    for c in lit.values():
        for x in c.get("xcons", []):
            owners[(x["ots"], int(x["in_port"]))] += 1
            owners[(x["ots"], int(x["out_port"]))] += 1
    xcons = bridge_xcons(ha)
    on_bridges = Counter((o, a) for o, a, _b in xcons)
    orphan_x = sorted(f"{o}:{a}->{b}" for o, a, b in xcons if (o, a) not in owners)
    dup_x = sorted({f"{o}:{a}" for (o, a), n in owners.items() if n > 1}
                   | {f"{o}:{a}" for (o, a), n in on_bridges.items() if n > 1})
    rules = reservation_rules(ha)
    lit_ids = {int(k) for k in lit}
    orphan_r = sorted(f"{sw}:{rid}:{m}" for sw, rid, m in rules if rid not in lit_ids)
    dup_r = sorted(f"{sw}:{rid}:{m}" for (sw, rid, m), n in Counter(rules).items() if n > 1)
    return {"lit": sorted(lit_ids), "expected": sorted(ours), "xcons_on_bridges": len(xcons),
            "reservation_rules": len(rules), "orphan_xcon_list": orphan_x, "duplicate_xcon_list": dup_x,
            "orphan_rule_list": orphan_r, "duplicate_rule_list": dup_r, "orphan_xcons": len(orphan_x),
            "duplicate_xcons": len(dup_x), "orphan_rules": len(orphan_r), "duplicate_rules": len(dup_r)}
