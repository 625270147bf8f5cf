"""The role messages on the wire (Nicira's 20 bytes, mlte's 32 with a generation id), the switch's role
bookkeeping, and the controller side: ``ofmsg.nx_role_request`` builds what the agent parses, and the
agent's NXT_ROLE_REPLY goes through os-ken and the OTS driver's vendor handler without harm."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from os_ken.ofproto import ofproto_parser, ofproto_v1_0, ofproto_v1_0_parser

from app.controller import ofmsg
from ots_virtual import of10, protocol, roles


def serialized(msg, xid: int = 77) -> bytes:
    msg.datapath = of10.DP
    return of10.serialize(msg, xid)


def parse_like_os_ken(raw: bytes):
    version, msg_type, msg_len, xid = ofproto_parser.header(raw)
    return ofproto_parser.msg(of10.DP, version, msg_type, msg_len, xid, raw)


@pytest.mark.parametrize("name, code, generation", [
    ("master", roles.MASTER, None), ("slave", roles.SLAVE, 12), ("other", roles.OTHER, None),
    ("equal", roles.OTHER, 2**64 - 1), ("master", roles.MASTER, 0),
])
def test_ofmsg_builds_the_bytes_the_agent_parses(name, code, generation):
    msg = ofmsg.nx_role_request(name, generation)
    assert not ofmsg.is_change(msg)  # a role request reads nothing and changes nothing: the gate lets it out
    raw = serialized(msg)
    assert raw == roles.encode(roles.NXT_ROLE_REQUEST, 77, code, generation)
    assert roles.is_role_message(raw)
    assert roles.decode(raw) == roles.RoleMessage(roles.NXT_ROLE_REQUEST, code, generation)
    assert len(raw) == (roles.PLAIN_LEN if generation is None else roles.GENERATION_LEN)


def test_plain_request_is_os_kens_own_encoding():
    ours = serialized(ofmsg.nx_role_request("slave"))
    theirs = serialized(ofproto_v1_0_parser.NXTRoleRequest(of10.DP, ofproto_v1_0.NX_ROLE_SLAVE))
    assert ours == theirs


def test_bad_builder_arguments():
    with pytest.raises(ValueError, match="master, slave or other"):
        ofmsg.nx_role_request("nochange")
    with pytest.raises(ValueError, match="64 bits"):
        ofmsg.nx_role_request("master", 2**64)


def test_decode_refuses_wrong_lengths():
    raw = roles.encode(roles.NXT_ROLE_REQUEST, 1, roles.MASTER, 3)
    for bad in (raw[:24], raw + b"\0" * 8, raw[:20] + b"\0\0"):
        fixed = bad[:2] + len(bad).to_bytes(2, "big") + bad[4:]
        with pytest.raises(roles.RoleFormatError):
            roles.decode(fixed)


def test_the_agents_reply_parses_in_os_ken_and_passes_the_ots_driver():
    """What a controller receives: os-ken makes an OFPVendor holding an NXTRoleReply; the OTS driver's
    EventOFPVendor handler (which looks for capability replies) leaves it alone."""
    from app.controller.ots_driver import OtsDriver

    for generation in (None, 41):
        raw = roles.encode(roles.NXT_ROLE_REPLY, 9, roles.MASTER, generation)
        msg = parse_like_os_ken(raw)
        assert isinstance(msg, ofproto_v1_0_parser.OFPVendor) and msg.vendor == roles.NX_VENDOR_ID
        assert isinstance(msg.data, ofproto_v1_0_parser.NXTRoleReply) and msg.data.role == roles.MASTER
        assert roles.parse_reply(msg) == roles.RoleMessage(roles.NXT_ROLE_REPLY, roles.MASTER, generation)
        assert not protocol.is_caps_reply(msg)
        OtsDriver._vendor(SimpleNamespace(), SimpleNamespace(msg=msg))  # returns before touching the driver


def test_parse_reply_ignores_other_messages():
    caps = of10.vendor(3, protocol.MLTE_VENDOR_ID, protocol.vendor_payload(protocol.CAPS_REPLY, b"{}"))
    assert roles.parse_reply(parse_like_os_ken(caps)) is None
    assert roles.parse_reply(roles.encode(roles.NXT_ROLE_REQUEST, 3, roles.MASTER)) is None  # a request
    assert roles.parse_reply(of10.barrier_reply(3)) is None


def test_role_bookkeeping():
    r = roles.Roles()
    for s in (1, 2, 3):
        r.add(s)
    assert all(r.may_change(s) for s in (1, 2, 3))  # everyone OTHER
    assert r.request(1, roles.MASTER, None) == roles.Decision(roles.MASTER, None)
    d = r.request(2, roles.MASTER, 4)
    assert d.demoted == (1,) and r.role(1) == roles.SLAVE and not r.may_change(1) and r.generation_id == 4
    assert r.may_change(3)  # an OTHER keeps full access next to a MASTER (as in OpenFlow)
    stale = r.request(3, roles.MASTER, 3)
    assert stale.stale and r.role(3) == roles.SLAVE and r.role(2) == roles.MASTER and r.generation_id == 4
    assert not r.request(3, roles.OTHER, 1).stale and r.role(3) == roles.OTHER  # OTHER: no generation check
    r.remove(2)
    r.add(4)
    assert r.role(4) == roles.OTHER and r.generation_id == 4  # the generation outlives sessions
