"""LLDP frames we send and parse; how datapaths are classified; OF1.0 error names."""
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
