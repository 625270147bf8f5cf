"""Batching: XCON FLOW_MODs sent before one BARRIER_REQUEST are provisioned as one batch, one delay.

Driven by the foreign OF1.0 test controller (no OVS). The race this guards against: the worker took
the first FLOW_MOD of a two-way XCON before the reader had queued the second, so the barrier waited
two delays and the ports lit by the first batch went dark again for the second.
"""
from __future__ import annotations

import time

import pytest
from os_ken.ofproto import ofproto_v1_0 as ofp
from os_ken.ofproto import ofproto_v1_0_parser as parser

from ots_virtual import of10
from ots_virtual.agent import OtsAgent
from tests.lib.of10_client import Of10Controller, delete_xcon, xcon

PORTS = {1: "ODU2", 2: "ODU2", 3: "ODU2", 4: "ODU2"}
DELAY = 0.3
TRIES = 10


@pytest.fixture
def agent(start_agent):
    return start_agent("ut-batch", 0x0F02, PORTS, delay=lambda: DELAY)


def configs(ctl: Of10Controller, start: int, port: int) -> list[int]:
    """The ``config`` of every PORT_STATUS for ``port`` since message index ``start``, in order."""
    return [s.desc.config for s in ctl.port_statuses(start) if s.desc.port_no == port]


def assert_never_dark_after_lit(seq: list[int]) -> None:
    lit = [i for i, c in enumerate(seq) if not c & ofp.OFPPC_PORT_DOWN]
    assert lit, f"port never lit: {seq}"
    assert all(not c & ofp.OFPPC_PORT_DOWN for c in seq[lit[0]:]), f"port went dark after it was lit: {seq}"


def two_way_xcon(ctl: Of10Controller, a: int, b: int, gap: float | None) -> tuple[float, int]:
    """Send XCON a->b, b->a and a BARRIER (one TCP write if ``gap`` is None, else three writes ``gap``
    s apart); return (seconds from the barrier's write to its reply, index of the first message sent)."""
    start = ctl.mark()
    msgs = [of10.serialize(xcon(a, b), ctl.next_xid()), of10.serialize(xcon(b, a), ctl.next_xid())]
    bxid = ctl.next_xid()
    barrier = of10.serialize(parser.OFPBarrierRequest(of10.DP), bxid)
    if gap is None:
        sent = time.monotonic()
        ctl.send(b"".join([*msgs, barrier]))
    else:
        for m in msgs:
            ctl.send(m)
            if gap:
                time.sleep(gap)
        sent = time.monotonic()
        ctl.send(barrier)
    reply = ctl.wait_for(lambda r: r.header.xid == bxid and r.header.msg_type == ofp.OFPT_BARRIER_REPLY,
                         start=start)
    return reply.at - sent, start


def tear_down(ctl: Of10Controller, agent: OtsAgent, a: int, b: int) -> None:
    before = agent.batch_count
    sent = time.monotonic()
    ctl.send(b"".join(of10.serialize(m, ctl.next_xid()) for m in (delete_xcon(a), delete_xcon(b))))
    ctl.barrier()
    assert time.monotonic() - sent < DELAY  # a deletes-only batch does not wait the provisioning delay
    assert agent.batch_count == before + 1 and agent.batches[-1].delay == 0.0


@pytest.mark.parametrize("gap", [None, 0.0, 0.02], ids=["one-write", "back-to-back-writes", "writes-20ms-apart"])
def test_two_way_xcon_is_one_batch_with_one_delay(ctl, agent, gap):
    for _ in range(TRIES):
        before = agent.batch_count
        latency, start = two_way_xcon(ctl, 1, 2, gap)
        assert DELAY <= latency < 1.5 * DELAY, f"barrier reply after {latency:.3f}s (delay {DELAY}s)"
        for port in (1, 2):
            assert_never_dark_after_lit(configs(ctl, start, port))
        assert agent.batch_count == before + 1
        batch = agent.batches[-1]
        assert (batch.changes, batch.closed_by, batch.delay) == (2, "barrier", DELAY)
        tear_down(ctl, agent, 1, 2)


def test_changes_without_a_barrier_are_applied_after_the_stream_goes_quiet(ctl, agent):
    """No barrier follows: the batch closes once nothing more has arrived for ``batch_idle`` s."""
    before = agent.batch_count
    start = ctl.mark()
    ctl.send(xcon(3, 4))
    time.sleep(0.02)
    ctl.send(xcon(4, 3))
    lit = ctl.wait_for(lambda r: r.header.msg_type == ofp.OFPT_PORT_STATUS and r.msg.desc.port_no == 4
                       and not r.msg.desc.config & ofp.OFPPC_PORT_DOWN, start=start, timeout=5)
    assert lit.at > 0
    assert agent.wait_idle()
    assert agent.batch_count == before + 1
    batch = agent.batches[-1]
    assert (batch.changes, batch.closed_by) == (2, "idle")
    assert batch.closed - batch.first_change >= agent.batch_idle
    for port in (3, 4):
        assert_never_dark_after_lit(configs(ctl, start, port))


def test_a_barrier_ends_the_batch_so_the_next_one_waits_its_own_delay(ctl, agent):
    """FLOW_MOD, BARRIER, FLOW_MOD, BARRIER in one write: two batches, the second reply one delay later."""
    start = ctl.mark()
    xids = [ctl.next_xid() for _ in range(4)]
    ctl.send(of10.serialize(xcon(1, 2), xids[0]) + of10.serialize(parser.OFPBarrierRequest(of10.DP), xids[1])
             + of10.serialize(xcon(3, 4), xids[2]) + of10.serialize(parser.OFPBarrierRequest(of10.DP), xids[3]))
    first, second = (ctl.wait_for(lambda r, x=x: r.header.xid == x, start=start) for x in (xids[1], xids[3]))
    assert second.at - first.at >= 0.9 * DELAY
    assert agent.wait_idle()
    assert [b.changes for b in list(agent.batches)[-2:]] == [1, 1]


def start_agent(ctl: Of10Controller, **kw) -> OtsAgent:
    a = OtsAgent("ut-batch", 0x0F02, PORTS, ctl.address, delay=lambda: 0.05, claim=False, ovs_wait=0, **kw)
    a.start()
    ctl.wait_connected()
    return a


def test_a_stream_without_barriers_is_cut_at_batch_max(ctl):
    """Changes 50 ms apart never leave the stream idle: batch_max still moves them along."""
    agent = start_agent(ctl, batch_idle=0.2, batch_max=0.5)
    try:
        for i in range(16):
            ctl.send(xcon(1, 2) if i % 2 == 0 else delete_xcon(1))
            time.sleep(0.05)
        assert agent.wait_idle()
        batches = list(agent.batches)
        assert batches[0].closed_by == "max" and 0.5 <= batches[0].closed - batches[0].first_change < 0.8
        assert sum(b.changes for b in batches) == 16 and len(batches) >= 2
    finally:
        agent.stop()


def test_the_end_of_the_session_closes_the_batch(ctl):
    """Changes whose session ends before any barrier are applied at once, not after batch_idle."""
    agent = start_agent(ctl, batch_idle=5.0, batch_max=10.0)
    try:
        ctl.send(xcon(3, 4))
        ctl.disconnect()
        deadline = time.monotonic() + 3
        while agent.batch_count == 0:
            assert time.monotonic() < deadline, "batch not applied after the session ended"
            time.sleep(0.02)
        assert (agent.batches[-1].changes, agent.batches[-1].closed_by) == (1, "session-end")
    finally:
        agent.stop()


def test_batch_settings_are_checked():
    with pytest.raises(ValueError):
        OtsAgent("b", 1, PORTS, ("127.0.0.1", 9), batch_idle=2.0, batch_max=1.0, claim=False)
