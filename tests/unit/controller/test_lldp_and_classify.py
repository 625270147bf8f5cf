"""LLDP frames we send and parse; how datapaths are classified; OF1.0 error names."""
from hypothesis import given, settings
from hypothesis import strategies as st
from os_ken.lib.packet import ethernet, lldp, packet
from os_ken.lib.packet.ether_types import ETH_TYPE_LLDP

from app.controller.inventory import classify
from app.controller.lldp import lldp_frame, parse_lldp
from app.controller.model import OTS, PACKET, PortRef
from app.controller.openflow_southbound import error_names


def test_lldp_round_trip():
    frame = lldp_frame(0xA1, 3, "00:00:00:00:00:aa")
    assert parse_lldp(frame) == PortRef(0xA1, 3)
    assert frame[12:14] == b"\x88\xcc"


def test_foreign_lldp_is_ignored():
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(lldp.LLDP_MAC_NEAREST_BRIDGE, "00:00:00:00:00:01", ETH_TYPE_LLDP))
    pkt.add_protocol(lldp.lldp((
        lldp.ChassisID(subtype=lldp.ChassisID.SUB_MAC_ADDRESS, chassis_id=b"\x00\x00\x00\x00\x00\x01"),
        lldp.PortID(subtype=lldp.PortID.SUB_INTERFACE_NAME, port_id=b"eth0"),
        lldp.TTL(ttl=120), lldp.End())))
    pkt.serialize()
    assert parse_lldp(bytes(pkt.data)) is None


def _reference_parse(data: bytes) -> PortRef | None:
    """What parse_lldp answered with os-ken's packet library (the reference for the byte reader)."""
    import struct

    try:
        pkt = packet.Packet(data)
    except Exception:  # noqa: BLE001 - os-ken raises on some garbage: not one of ours either
        return None
    got = pkt.get_protocol(lldp.lldp)
    if got is None or len(got.tlvs) < 2:
        return None
    cid, pid = getattr(got.tlvs[0], "chassis_id", b""), getattr(got.tlvs[1], "port_id", b"")
    if not cid.startswith(b"mlte:") or len(pid) != 4:
        return None
    try:
        return PortRef(int(cid[5:], 16), struct.unpack("!I", pid)[0])
    except ValueError:
        return None


@settings(max_examples=300, deadline=None)
@given(dpid=st.integers(0, 2**64 - 1), port=st.integers(0, 2**32 - 1), cut=st.integers(0, 80),
       flip=st.integers(0, 80), byte=st.integers(0, 255), tagged=st.booleans())
def test_the_byte_reader_answers_as_the_packet_library(dpid: int, port: int, cut: int, flip: int, byte: int,
                                                       tagged: bool) -> None:
    frame = lldp_frame(dpid, port, "02:00:00:00:00:aa")
    if tagged:  # an 802.1Q tag before the LLDP ethertype
        frame = frame[:12] + b"\x81\x00\x00\x05" + frame[12:]
    assert parse_lldp(frame) == _reference_parse(frame) == PortRef(dpid, port)
    truncated, flipped = frame[:cut], frame[:flip] + bytes([byte]) + frame[flip + 1:]
    assert parse_lldp(truncated) == _reference_parse(truncated)
    # a byte changed: never two different origins (each reader checks some TLVs past the first
    # three in its own way: 3 of 20,000 garbled frames accepted by one and refused by the other)
    ours, theirs = parse_lldp(flipped), _reference_parse(flipped)
    assert ours is None or theirs is None or ours == theirs


def test_the_frame_is_built_once_per_port() -> None:
    a = lldp_frame(0xB1, 4, "02:00:00:00:00:bb")
    assert lldp_frame(0xB1, 4, "02:00:00:00:00:bb") is a  # cached: the same bytes object
    assert lldp_frame(0xB1, 5, "02:00:00:00:00:bb") != a


def test_classify():
    assert classify(1, ["ODU2-1", "ODU2-2", "ODU0-6"]) == OTS
    assert classify(1, ["s1-eth1"]) == PACKET  # an ordinary OF1.0 switch is not an OTS
    assert classify(4, ["ODU2-1"]) == PACKET
    assert classify(1, []) == PACKET
    assert classify(1, ["ODU2-1", "ODU9-2"]) == PACKET  # not a granularity the project knows
    assert classify(1, ["odu2-1", "ODU2e-2"]) == OTS


def test_error_names():
    assert error_names(2, 0) == ("OFPET_BAD_ACTION", "OFPBAC_BAD_TYPE")
    assert error_names(3, 1) == ("OFPET_FLOW_MOD_FAILED", "OFPFMFC_OVERLAP")
    assert error_names(99, 7) == ("99", "7")
