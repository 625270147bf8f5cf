"""Loss of light and XCON adoption in the agent, over a fake OVS bridge (no root, no OVS).

The fake bridge behaves like OVS on veths: an admin-down port reports config PORT_DOWN and LINK_DOWN,
a port whose cable's far end is down reports LINK_DOWN. The agent must darken the XCON partner of a
faulted port, light it again on repair, never light a port someone else took down, and report a
fault (config 0, LINK_DOWN) apart from a port it darkened (config PORT_DOWN, LINK_DOWN).
"""
from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from os_ken.ofproto import ofproto_v1_0 as ofp
from os_ken.ofproto import ofproto_v1_0_parser as parser

from ots_virtual import of10
from tests.lib.of10_client import Of10Controller, delete_xcon, xcon

PORTS = {1: "ODU2", 2: "ODU2", 3: "ODU2", 4: "ODU2"}
DELAY = 0.05
FAULT = (0, ofp.OFPPS_LINK_DOWN)  # (config, state) of a faulted port in an XCON
DARK = (ofp.OFPPC_PORT_DOWN, ofp.OFPPS_LINK_DOWN)  # ... of a port the agent holds dark
LIT = (0, 0)


def wait(pred: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def reported(ctl: Of10Controller, port: int) -> tuple[int, int] | None:
    """The (config, state) the agent last reported upstream for ``port``."""
    st = [s for s in ctl.port_statuses() if s.desc.port_no == port]
    return (st[-1].desc.config, st[-1].desc.state) if st else None


def wait_reported(ctl: Of10Controller, port: int, want: tuple[int, int]) -> None:
    wait(lambda: reported(ctl, port) == want, f"port {port} reported as {want} (last {reported(ctl, port)})")


def circuit(ctl: Of10Controller, a: int, b: int) -> None:
    ctl.send(xcon(a, b))
    ctl.send(xcon(b, a))
    ctl.barrier()


def remove(ctl: Of10Controller, a: int, b: int) -> None:
    ctl.send(delete_xcon(a))
    ctl.send(delete_xcon(b))
    ctl.barrier()


@pytest.fixture
def rig(start_agent, fake_bridge, ctl):
    agent = start_agent("ut-los", 0x0F0A, PORTS, delay=lambda: DELAY)
    bridge = fake_bridge(agent, sorted(PORTS))
    circuit(ctl, 1, 3)
    wait(lambda: bridge.admin[1] and bridge.admin[3], "circuit 1<->3 lit")
    wait_reported(ctl, 1, LIT)
    wait_reported(ctl, 3, LIT)
    return agent, bridge, ctl


def test_a_lost_carrier_darkens_the_partner_and_repair_relights_it(rig):
    agent, bridge, ctl = rig
    bridge.set_peer(3, False)  # the fibre at port 3 is cut at its far end
    wait(lambda: not bridge.admin[1], "port 1 darkened")
    assert agent.los == {1} and bridge.admin[3]  # the faulted port itself is left alone
    wait_reported(ctl, 3, FAULT)
    wait_reported(ctl, 1, DARK)
    bridge.set_peer(3, True)
    wait(lambda: bridge.admin[1], "port 1 lit again")
    assert agent.los == set()
    wait_reported(ctl, 1, LIT)
    wait_reported(ctl, 3, LIT)


def test_an_operator_down_sticks_and_survives_reprovisioning(rig):
    agent, bridge, ctl = rig
    mark = len(bridge.port_mods)
    bridge.set_admin(3, False)  # ip link set <port 3> down
    wait(lambda: not bridge.admin[1], "port 1 darkened")
    wait_reported(ctl, 3, FAULT)
    remove(ctl, 1, 3)  # the controller re-provisions the same circuit over the cut port
    circuit(ctl, 1, 3)
    time.sleep(0.1)
    assert not bridge.admin[3] and not bridge.admin[1] and agent.los == {1}
    assert (3, True) not in bridge.port_mods[mark:] and (1, True) not in bridge.port_mods[mark:]
    wait_reported(ctl, 3, FAULT)
    wait_reported(ctl, 1, DARK)
    bridge.set_admin(3, True)  # ip link set <port 3> up
    wait(lambda: bridge.admin[1], "port 1 lit again")
    assert agent.los == set()
    wait_reported(ctl, 1, LIT)


def test_a_cut_port_stays_a_fault_after_its_xcon_is_gone_until_it_is_repaired(rig):
    """The controller takes the broken circuit down: the cut end must still read as a fault (so new
    paths keep away from the fibre) until somebody brings it up again; then it is dark like any unused port."""
    agent, bridge, ctl = rig
    bridge.set_admin(3, False)  # ip link set <port 3> down
    wait_reported(ctl, 3, FAULT)
    remove(ctl, 1, 3)
    time.sleep(0.1)
    wait_reported(ctl, 3, FAULT)
    wait_reported(ctl, 1, DARK)  # the partner is just an unused port now
    bridge.set_admin(3, True)  # repaired
    wait_reported(ctl, 3, DARK)


def test_deleting_the_xcon_ends_the_los(rig):
    agent, bridge, ctl = rig
    bridge.set_peer(3, False)
    wait(lambda: agent.los == {1}, "LOS on port 1")
    remove(ctl, 1, 3)
    assert agent.los == set()
    circuit(ctl, 1, 2)  # port 1 re-used on a healthy circuit: lit
    wait(lambda: bridge.admin[1] and bridge.admin[2], "circuit 1<->2 lit")
    wait_reported(ctl, 1, LIT)
    assert agent.los == set() and not bridge.admin[3]


def test_a_port_whose_peer_never_lit_darkens_nothing(start_agent, fake_bridge, ctl):
    """A scan probe or a circuit whose next hop is still being set up: the lit side stays lit."""
    agent = start_agent("ut-los", 0x0F0B, PORTS, delay=lambda: DELAY)
    bridge = fake_bridge(agent, sorted(PORTS), peer={4: False})
    circuit(ctl, 2, 4)
    wait(lambda: bridge.admin[2] and bridge.admin[4], "probe lit")
    wait_reported(ctl, 4, FAULT)
    time.sleep(0.1)
    assert bridge.admin[2] and agent.los == set()
    bridge.set_peer(4, True)  # the next hop lights: from now on a loss is a loss
    wait_reported(ctl, 4, LIT)
    bridge.set_peer(4, False)
    wait(lambda: not bridge.admin[2], "port 2 darkened")


def test_a_restarted_agent_adopts_the_xcon_flows(start_agent, fake_bridge, ctl):
    agent = start_agent("ut-los", 0x0F0C, PORTS, delay=lambda: DELAY)
    flows = {(100, 1): [3], (100, 3): [1], (0, 0): []}
    bridge = fake_bridge(agent, sorted(PORTS), flows=flows, admin={1: True, 3: True})
    assert sorted((x.in_port, x.out_port) for x in agent.adopted) == [(1, 3), (3, 1)]
    assert bridge.xcons() == {1: 3, 3: 1}  # not wiped
    assert (1, False) not in bridge.port_mods and (3, False) not in bridge.port_mods
    assert bridge.admin[1] and bridge.admin[3] and not bridge.admin[2]
    stats = ctl.stats(parser.OFPFlowStatsRequest(of10.DP, 0, parser.OFPMatch(), 0xFF, ofp.OFPP_NONE))
    assert sorted((f.match.in_port, f.actions[0].port) for f in stats) == [(1, 3), (3, 1)]
    f = ctl.features()
    assert f.ports[1].config == 0 and f.ports[2].config & ofp.OFPPC_PORT_DOWN
    bridge.set_peer(3, False)  # LOS works on adopted XCONs
    wait(lambda: not bridge.admin[1], "port 1 darkened")
    bridge.set_peer(3, True)
    wait(lambda: bridge.admin[1], "port 1 lit again")
    remove(ctl, 1, 3)  # and the controller can delete them
    assert bridge.xcons() == {} and not bridge.admin[1] and not bridge.admin[3]


def test_a_restarted_agent_keeps_a_los_in_progress(start_agent, fake_bridge, ctl):
    agent = start_agent("ut-los", 0x0F0D, PORTS, delay=lambda: DELAY)
    bridge = fake_bridge(agent, sorted(PORTS), flows={(100, 1): [3], (100, 3): [1]},
                         admin={1: False, 3: True}, peer={3: False})
    assert agent.los == {1} and (1, True) not in bridge.port_mods
    wait_reported(ctl, 1, DARK)
    bridge.set_peer(3, True)
    wait(lambda: bridge.admin[1], "port 1 lit on repair")


def test_a_restarted_agent_keeps_an_operator_cut(start_agent, fake_bridge, ctl):
    agent = start_agent("ut-los", 0x0F0E, PORTS, delay=lambda: DELAY)
    bridge = fake_bridge(agent, sorted(PORTS), flows={(100, 1): [3], (100, 3): [1]}, admin={1: True, 3: False})
    wait(lambda: not bridge.admin[1], "port 1 darkened")
    assert (3, True) not in bridge.port_mods
    bridge.set_admin(3, True)
    wait(lambda: bridge.admin[1], "port 1 lit on repair")


def test_a_fresh_bridge_starts_clean(start_agent, fake_bridge, ctl):
    agent = start_agent("ut-los", 0x0F0F, PORTS, delay=lambda: DELAY)
    bridge = fake_bridge(agent, sorted(PORTS), flows={(7, 2): [4]})  # no XCON-priority flow: nothing to adopt
    assert agent.adopted == [] and bridge.flows == {(0, 0): []}
