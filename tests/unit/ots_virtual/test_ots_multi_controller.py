"""One agent, two controllers (as Open vSwitch with two ``set-controller`` targets): both sessions see
every PORT_STATUS, Nicira roles decide who may change the switch, a stale generation id is refused.

Driven by two foreign OF1.0 test controllers over TCP on 127.0.0.1 (no OVS, no root): what is checked
is the wire: replies, errors and the XCON table as flow stats show it.
"""
from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from os_ken.ofproto import ofproto_v1_0 as ofp
from os_ken.ofproto import ofproto_v1_0_parser as parser

from ots_virtual import of10, roles
from ots_virtual.agent import OtsAgent
from tests.lib.of10_client import Of10Controller, Received, delete_xcon, error_of, xcon

PORTS = {1: "ODU2", 2: "ODU2", 3: "ODU2", 4: "ODU2"}
DELAY = 0.05


def wait_until(cond, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


@pytest.fixture
def ctls() -> Iterator[tuple[Of10Controller, Of10Controller]]:
    a, b = Of10Controller(), Of10Controller()
    yield a, b
    a.close()
    b.close()


@pytest.fixture
def agent(ctls) -> Iterator[OtsAgent]:
    a, b = ctls
    agent = OtsAgent("ut-multi", 0x0F21, PORTS, [a.address, b.address], delay=lambda: DELAY, claim=False, ovs_wait=0)
    agent.start()
    try:
        a.wait_connected()
        b.wait_connected()
        yield agent
    finally:
        agent.stop()


def ask_role(ctl: Of10Controller, role: int, generation_id: int | None = None) -> Received:
    """Send NXT_ROLE_REQUEST (mlte's form with a generation id); return the answer (reply or ERROR)."""
    xid = ctl.next_xid()
    ctl.send(roles.encode(roles.NXT_ROLE_REQUEST, xid, role, generation_id))
    return ctl.reply(xid)


def role_of(reply: Received) -> roles.RoleMessage:
    assert reply.header.msg_type == ofp.OFPT_VENDOR, f"expected NXT_ROLE_REPLY, got type {reply.header.msg_type}"
    msg = roles.parse_reply(reply.raw)
    assert msg is not None
    return msg


def xcons(ctl: Of10Controller) -> list[tuple[int, int]]:
    flows = ctl.stats(parser.OFPFlowStatsRequest(of10.DP, 0, parser.OFPMatch(), 0xFF, ofp.OFPP_NONE))
    return sorted((s.match.in_port, s.actions[0].port) for s in flows)


def test_both_controllers_see_every_port_status(ctls, agent):
    a, b = ctls
    marks = a.mark(), b.mark()
    a.send(xcon(1, 2))
    a.barrier()
    for ctl, mark in zip(ctls, marks, strict=True):
        wait_until(lambda c=ctl, m=mark: {s.desc.port_no for s in c.port_statuses(m)
                                          if not s.desc.config & ofp.OFPPC_PORT_DOWN} == {1, 2})
    # B (which sent nothing) reads the XCON A made: one switch, one table
    assert xcons(b) == [(1, 2)]


def test_without_role_requests_every_controller_may_change_the_switch(ctls, agent):
    """No role asked: both are OTHER (today's single-controller behaviour, and Open vSwitch's)."""
    a, b = ctls
    a.send(xcon(1, 2))
    a.barrier()
    b.send(xcon(3, 4))
    b.barrier()
    assert xcons(a) == [(1, 2), (3, 4)]
    assert agent.roles.snapshot() and set(agent.roles.snapshot().values()) == {roles.OTHER}


def test_a_master_makes_the_other_master_a_slave_whose_changes_are_refused(ctls, agent):
    a, b = ctls
    assert role_of(ask_role(a, roles.MASTER)).role == roles.MASTER
    assert role_of(ask_role(b, roles.MASTER)).role == roles.MASTER  # A is SLAVE now
    assert sorted(agent.roles.snapshot().values()) == [roles.MASTER, roles.SLAVE]
    b.send(xcon(3, 4))
    b.barrier()
    refused = [xcon(1, 2), delete_xcon(3),
               parser.OFPPortMod(of10.DP, 1, "02:0f:0f:21:00:01", 0, ofp.OFPPC_PORT_DOWN, 0),
               parser.OFPPacketOut(of10.DP, 0xFFFFFFFF, ofp.OFPP_NONE, [parser.OFPActionOutput(1, 0)], b"\0" * 60)]
    for msg in refused:
        xid = a.send(msg)
        etype, code, data = error_of(a.reply(xid))
        assert (etype, code) == (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_EPERM)
        assert data == of10.serialize(msg, xid)[:64]
    a.barrier()  # reads still work for a SLAVE: barrier, stats, features, echo
    assert xcons(a) == [(3, 4)]  # nothing changed
    assert a.features().datapath_id == 0x0F21
    assert agent.slave_refusals == len(refused)
    # the MASTER still may
    b.send(delete_xcon(3))
    b.barrier()
    assert xcons(b) == []


def test_a_slave_still_gets_port_status_but_no_flow_removed(ctls, agent):
    a, b = ctls
    ask_role(b, roles.MASTER)
    role_of(ask_role(a, roles.SLAVE))
    b.send(xcon(1, 2, flags=ofp.OFPFF_SEND_FLOW_REM, cookie=7))
    b.barrier()
    marks = a.mark(), b.mark()
    b.send(delete_xcon(1))
    b.barrier()
    removed = b.wait_for(lambda r: r.header.msg_type == ofp.OFPT_FLOW_REMOVED, start=marks[1]).msg
    assert removed.cookie == 7
    wait_until(lambda: {s.desc.port_no for s in a.port_statuses(marks[0])} == {1, 2})  # the dark ports
    a.barrier()
    assert not [r for r in a.received[marks[0]:] if r.header.msg_type == ofp.OFPT_FLOW_REMOVED]


def test_a_stale_generation_is_refused_and_fences_the_session(ctls, agent):
    a, b = ctls
    reply = role_of(ask_role(a, roles.MASTER, 5))
    assert (reply.role, reply.generation_id) == (roles.MASTER, 5)
    assert role_of(ask_role(b, roles.MASTER, 6)).generation_id == 6  # the new leader
    # the deposed leader (A) asks again with its old epoch: refused, and it stays SLAVE
    req = roles.encode(roles.NXT_ROLE_REQUEST, 4242, roles.MASTER, 5)
    a.send(req)
    etype, code, data = error_of(a.reply(4242))
    assert (etype, code, data) == (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_EPERM, req)
    xid = a.send(xcon(1, 2))
    assert error_of(a.reply(xid))[:2] == (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_EPERM)
    assert agent.roles.generation_id == 6 and xcons(b) == []
    # a stale SLAVE request is refused too; the same generation again is not stale
    assert error_of(ask_role(a, roles.SLAVE, 3))[:2] == (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_EPERM)
    assert role_of(ask_role(b, roles.MASTER, 6)).role == roles.MASTER
    # a newer leader takes over: B is demoted
    assert role_of(ask_role(a, roles.MASTER, 7)).generation_id == 7
    xid = b.send(xcon(1, 2))
    assert error_of(b.reply(xid))[:2] == (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_EPERM)
    a.send(xcon(1, 2))
    a.barrier()
    assert xcons(a) == [(1, 2)]


def test_generation_ids_wrap_around_as_serial_numbers():
    assert roles.older(5, 6) and not roles.older(6, 5) and not roles.older(6, 6)
    assert roles.older(2**64 - 1, 1)  # 1 came after 2^64-1 (wrapped)
    assert not roles.older(1, 2**64 - 1)


def test_bad_role_requests_get_errors(ctls, agent):
    a, _ = ctls
    bad_role = roles.encode(roles.NXT_ROLE_REQUEST, 501, 7)
    a.send(bad_role)
    assert error_of(a.reply(501))[:2] == (ofp.OFPET_BAD_REQUEST, roles.NXBRC_BAD_ROLE)
    short = of10.vendor(502, roles.NX_VENDOR_ID, b"\0\0\0\x0a\0\0")  # subtype 10, 2 bytes of role
    a.send(short)
    assert error_of(a.reply(502))[:2] == (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN)
    assert agent.roles.snapshot() and set(agent.roles.snapshot().values()) == {roles.OTHER}
    assert a.request(parser.OFPEchoRequest(of10.DP, b"ok")).data == b"ok"  # the session lives on


def test_plain_nicira_request_gets_a_plain_reply(ctls, agent):
    a, _ = ctls
    reply = ask_role(a, roles.SLAVE)
    assert len(reply.raw) == roles.PLAIN_LEN
    assert reply.msg.data.role == roles.SLAVE  # os-ken parses it as NXTRoleReply
    assert role_of(reply) == roles.RoleMessage(roles.NXT_ROLE_REPLY, roles.SLAVE, None)
    assert role_of(ask_role(a, roles.OTHER)).role == roles.OTHER  # back to full access
    assert role_of(ask_role(a, roles.OTHER, 3)) == roles.RoleMessage(roles.NXT_ROLE_REPLY, roles.OTHER, 0)  # none set
    assert agent.roles.generation_id is None  # an OTHER request does not set it
    a.send(xcon(1, 2))
    a.barrier()
    assert xcons(a) == [(1, 2)]


def test_a_reconnecting_controller_starts_as_other_but_the_generation_is_kept(ctls, agent):
    a, b = ctls
    ask_role(a, roles.MASTER, 10)
    a.send(xcon(1, 2))
    a.barrier()
    a.disconnect()
    wait_until(lambda: a.connections == 2)
    a.wait_connected()
    assert b.connections == 1  # the other session was not touched
    assert b.features().datapath_id == 0x0F21
    assert sorted(agent.roles.snapshot().values()) == [roles.OTHER, roles.OTHER]
    assert xcons(a) == [(1, 2)]  # state survives, as with one controller
    # the back-in-session controller presents an older epoch: fenced
    assert error_of(ask_role(a, roles.MASTER, 9))[:2] == (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_EPERM)
    assert agent.roles.generation_id == 10
    xid = a.send(delete_xcon(1))
    assert error_of(a.reply(xid))[:2] == (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_EPERM)
    assert xcons(b) == [(1, 2)]


def test_a_controller_that_is_down_does_not_hold_up_the_other(ctls):
    a, b = ctls
    dead = Of10Controller()
    dead_address = dead.address
    dead.close()  # nothing listens there any more
    agent = OtsAgent("ut-multi2", 0x0F22, PORTS, [dead_address, b.address], delay=lambda: DELAY, claim=False,
                     ovs_wait=0)
    agent.start()
    try:
        b.wait_connected()
        assert b.features().datapath_id == 0x0F22 and agent.connected_upstream.is_set()
        b.send(xcon(1, 2))
        b.barrier()
        assert xcons(b) == [(1, 2)]
    finally:
        agent.stop()


def test_another_controllers_session_end_does_not_split_a_batch(ctls):
    """A two-way XCON from A before its barrier stays one batch even if B's session ends meanwhile."""
    a, b = ctls
    agent = OtsAgent("ut-multi3", 0x0F23, PORTS, [a.address, b.address], delay=lambda: DELAY, claim=False,
                     ovs_wait=0, batch_idle=2.0, batch_max=5.0)
    agent.start()
    try:
        a.wait_connected()
        b.wait_connected()
        a.send(xcon(1, 2))
        wait_until(lambda: len(agent.table) == 1)
        b.disconnect()
        wait_until(lambda: b.connections == 2)  # B's session ended (and came back)
        a.send(xcon(2, 1))
        a.barrier()
        assert [(x.changes, x.closed_by) for x in agent.batches] == [(2, "barrier")]
    finally:
        agent.stop()
