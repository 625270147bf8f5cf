"""Several controllers on a packet ring (P-Q-R-P, h1 on P, h3 on R): one leader elected through a
private etcd is MASTER at every switch, the others SLAVE; a killed leader and a frozen (SIGSTOP) one
are replaced, the switches follow the new master, forwarding keeps working, and a thawed ex-leader
changes nothing (issue 24). Real OVS, real etcd, real controller processes."""
from __future__ import annotations

import json
import subprocess
import time

import pytest

from app.controller.client import wait_until
from mininet_labs.netlock import net_lock
from tests.integration.test_packet_discovery import ring_spec

pytestmark = pytest.mark.integration


def roles(session) -> dict[str, dict[int, str]]:
    """Per switch: the role OVS gives each connected controller, by the controller's OpenFlow port."""
    res = subprocess.run(["ovs-vsctl", "--format=json", "--columns=_uuid,target,role,is_connected",
                          "list", "controller"], capture_output=True, text=True, timeout=10, check=True)
    table = json.loads(res.stdout)
    rows = {r["_uuid"][1]: r for r in (dict(zip(table["headings"], row, strict=True)) for row in table["data"])}
    out: dict[str, dict[int, str]] = {}
    for sw in ("P", "Q", "R"):
        ids = subprocess.run(["ovs-vsctl", "get", "bridge", session.lab.bridge(sw), "controller"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
        out[sw] = {int(r["target"].rsplit(":", 1)[1]): (r["role"] if isinstance(r["role"], str) else "")
                   for u, r in rows.items() if u in ids and r["is_connected"] is True}
    return out


def role_confirmed(member, since: float) -> float:
    """Seconds from ``since`` until the member's last MASTER role was confirmed by a switch (its journal)."""
    ts = [e["t"] for e in member.client.events(kind="role") if e.get("role") == "master" and e["t"] > since]
    assert ts, "no switch confirmed the new master"
    return max(ts) - since


def masters(session) -> set[int]:
    return {port for per in roles(session).values() for port, role in per.items() if role == "master"}


def ping(session, count: int = 3) -> bool:
    h1 = session.lab.node("h1")
    out = h1.cmd(f"ping -c {count} -i 0.2 -W 1 10.0.0.3")
    return f" {count} received" in out or (count > 1 and " 0% packet loss" in out)


@pytest.fixture(scope="module")
def ha(tmp_path_factory):
    pytest.importorskip("etcd3gw")
    from mininet_labs.ha_session import HaSession

    with net_lock(), HaSession(ring_spec(), tmp_path_factory.mktemp("ha"), controllers=3) as session:
        yield session


def test_one_leader_is_master_at_every_switch(ha):
    leader = ha.wait_leader()
    wait_until(lambda: masters(ha) == {leader.of_port} or None, 20, "the leader to be master at every switch")
    per = roles(ha)
    assert all(per[sw][leader.of_port] == "master" for sw in per), per
    others = {m.of_port for m in ha.members if m is not leader}
    assert all(per[sw].get(p) == "slave" for sw in per for p in others), per
    ha.wait_links(timeout=20)
    assert wait_until(lambda: ping(ha) or None, 20, "h1 to reach h3 through the leader")
    for m in ha.members:
        st = m.client.request("GET", "/mastership")
        assert st["mode"] == "elected" and st["master"] == (m is leader), st
    assert ha.controller_errors() == "", ha.controller_errors()


def test_a_killed_leader_is_replaced_and_forwarding_goes_on(ha):
    old = ha.wait_leader()
    wait_until(lambda: masters(ha) == {old.of_port} or None, 20, "the leader to be master at every switch")
    killed = ha.kill(old)
    new = ha.wait_leader(timeout=20, exclude=old)
    wait_until(lambda: masters(ha) == {new.of_port} or None, 20, "every switch to follow the new master")
    print(f"takeover after SIGKILL (every switch confirmed the new master): {role_confirmed(new, killed):.3f}s")
    assert new is not old
    ha.wait_links(timeout=20)
    assert wait_until(lambda: ping(ha) or None, 20, "h1 to reach h3 through the new leader")
    ha.restart(old)  # back as a follower
    time.sleep(2 * ha.ttl)
    assert ha.leader() is new
    assert ha.controller_errors() == "", ha.controller_errors()


def test_a_frozen_leader_is_replaced_and_changes_nothing_when_it_wakes(ha):
    old = ha.wait_leader()
    wait_until(lambda: masters(ha) == {old.of_port} or None, 20, "the leader to be master at every switch")
    frozen = ha.freeze(old)
    new = ha.wait_leader(timeout=20, exclude=old)
    wait_until(lambda: masters(ha) == {new.of_port} or None, 20, "every switch to follow the new master")
    print(f"takeover after SIGSTOP: {role_confirmed(new, frozen):.3f}s")
    time.sleep(3.0)  # frozen well past its lease
    ha.thaw(old)
    time.sleep(1.0)
    st = old.client.request("GET", "/mastership")
    assert st["master"] is False, st  # it knew at once: its lease's local deadline passed
    assert masters(ha) == {new.of_port}
    assert wait_until(lambda: ping(ha) or None, 20, "h1 to reach h3 after the thaw")
    assert ha.controller_errors() == "", ha.controller_errors()
