"""Mastership (several controllers): the gate, the lease's local deadline, stale epochs, and apps that
stay quiet as followers and take over when elected (fake datapaths, no switch, no etcd)."""
from __future__ import annotations

import pytest
from os_ken.ofproto import ofproto_v1_3_parser

from app.controller import events, ofmsg
from app.controller.forwarding import Forwarding
from app.controller.lldp import LldpDiscovery
from app.controller.mastership import CONTEXT as MASTERSHIP
from app.controller.mastership import Mastership, role_messages
from app.controller.network_view import CONTEXT as VIEW
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import GateClosed
from tests.unit.controller.test_forwarding_restart import make_app

P = ofproto_v1_3_parser


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def elected_mastership(clock: Clock, lease_until: list[float]) -> Mastership:
    m = Mastership(clock=clock)
    m.elected_mode(lambda now: now < lease_until[0])
    return m


def test_one_controller_is_always_master_and_sends_no_role():
    m = Mastership()
    assert m.is_master() and m.acting() and m.mode == "single"
    assert m.to_json()["master"] is True


def test_elected_master_only_while_its_lease_holds():
    clock, until = Clock(), [105.0]
    m = elected_mastership(clock, until)
    seen = []
    m.subscribe(seen.append)
    assert not m.is_master()  # a candidate is a follower until elected
    m.elected(7)
    assert m.is_master() and m.epoch == 7 and m.generation() == 7
    assert [c.master for c in seen] == [True]
    clock.t = 106.0  # frozen past the lease (SIGSTOP): no round trip needed to know it must stop
    assert not m.is_master() and m.role() == "slave"
    until[0] = 200.0
    assert m.is_master()
    m.deposed("lease lost")
    assert not m.is_master() and [c.master for c in seen] == [True, False]
    m.deposed("again")  # no second announcement
    assert len(seen) == 2


def test_a_newer_epoch_deposes_at_once():
    clock, until = Clock(), [1e9]
    m = elected_mastership(clock, until)
    m.elected(3)
    m.saw_epoch(4, "switch A")
    assert not m.is_master() and "newer epoch 4" in m.reason
    assert m.generation() == 4  # a follower's SLAVE request carries the newest epoch it knows
    m.elected(2)  # an election result older than what a switch showed us: refused
    assert not m.is_master()
    m.elected(5)
    assert m.is_master()


def test_role_messages_by_version():
    (msg,) = role_messages(4, "master", 9)
    assert isinstance(msg, P.OFPRoleRequest) and msg.generation_id == 9
    assert not ofmsg.is_change(msg)  # a follower may still send its role
    (nx,) = role_messages(1, "slave", 9)
    assert not ofmsg.is_change(nx)


def _quiet_forwarding(m: Mastership):
    app, dps, sws, view = make_app()
    app.mastership = m
    app.southbound.gate = m.is_master
    return app, dps, sws, view


def test_the_gate_refuses_changes_from_a_follower():
    clock, until = Clock(), [1e9]
    m = elected_mastership(clock, until)
    app, dps, _sws, _view = _quiet_forwarding(m)
    with pytest.raises(GateClosed):
        app.southbound.send(dps[0xA1], [ofmsg.flow_delete(1)], kind="test")
    app.southbound.send(dps[0xA1], [ofmsg.barrier(4)], kind="test")  # reads still go
    assert app.southbound.refused_by_type["OFPFlowMod"] == 1


def test_a_following_forwarding_app_sends_nothing_then_takes_over_when_elected():
    clock, until = Clock(), [1e9]
    m = elected_mastership(clock, until)
    app, dps, sws, view = _quiet_forwarding(m)
    for sw in sws.values():
        app._switch_enter(events.EventSwitchEnter(sw))
    app._replan()
    assert all(not dp.sent for dp in dps.values())  # a follower: nothing left, no read-back started
    assert not app._readback
    m.elected(1)
    app._mastership(events.EventMastership(True, 1, "leader (epoch 1)"))
    assert set(app._readback) == set(dps)  # every switch read back and adopted, as after a restart
    assert all(dp.flow_mods() for dp in dps.values())  # base rules (table-miss, ARP) went in


def test_a_following_lldp_app_sends_no_frames_until_elected():
    clock, until = Clock(), [1e9]
    m = elected_mastership(clock, until)
    _fwd, dps, sws, view = make_app()
    lldp = LldpDiscovery(**{VIEW: view, SOUTHBOUND: _fwd.southbound, MASTERSHIP: m})
    for sw in sws.values():
        lldp._switch_enter(events.EventSwitchEnter(sw))
    assert lldp._probe_all() == 6 and all(not dp.sent for dp in dps.values())
    m.elected(1)
    lldp._mastership(events.EventMastership(True, 1, "leader"))
    assert all(any(isinstance(x, P.OFPPacketOut) for x in dp.sent) for dp in dps.values())
    assert all(dp.flow_mods() for dp in dps.values())  # the LLDP trap


def test_forwarding_contexts_declare_the_mastership():
    assert Forwarding._CONTEXTS[MASTERSHIP] is Mastership


def test_a_new_leaders_ots_driver_reads_every_ots_back_and_settles_what_changed():
    """A follower knew the XCONs present when the OTS connected; the old leader removed 1<->2 and lit
    3<->4 since. Elected, the driver reads back and ends with what the OTS holds now."""
    from tests.unit.controller.test_ots_readback import X, make_driver, read_back

    driver, dp, sw, posted = make_driver({1: 2, 2: 1})
    driver._switch_enter(events.EventSwitchEnter(sw))
    read_back(driver, posted)
    assert driver.xcons[X] == {1: 2, 2: 1}
    dp.table.clear()
    dp.table.update({3: 4, 4: 3})  # the old leader's changes, unseen by this follower
    driver._mastership(events.EventMastership(True, 5, "leader (epoch 5)"))
    assert driver.reconciling(X)
    read_back(driver, posted)
    assert driver.xcons[X] == {3: 4, 4: 3} and not driver.unknown.get(X)
    driver._mastership(events.EventMastership(False, 5, "deposed"))  # nothing to do when deposed
    assert not driver.reconciling(X)
