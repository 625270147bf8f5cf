"""The capabilities VENDOR message as the controller sees it, and granularity helpers."""
from __future__ import annotations

import pytest
from os_ken.ofproto import ofproto_v1_0 as ofp

from ots_virtual import of10, protocol
from ots_virtual.granularity import (
    PortSpecError,
    capacity_mbps,
    granularity_from_port_name,
    parse_ports,
    port_name,
    speed_bits,
)

CAPS = protocol.Capabilities(
    dpid=0x0F01, name="X", unit_mbps=2.0, setup_time_min=0.15, setup_time_max=0.22, table_capacity=2,
    ports={1: protocol.PortCaps("ODU2", 10.0, 20.0), 6: protocol.PortCaps("ODU0", 1.25, 2.5)},
    granularities={"ODU0": 1.25, "ODU2": 10.0},
)


def test_caps_json_round_trip():
    assert protocol.Capabilities.from_json(CAPS.to_json()) == CAPS


def test_caps_request_is_an_mlte_vendor_message():
    raw = of10.serialize(protocol.caps_request(of10.DP), 5)
    vid, payload = of10.decode_vendor(raw)
    assert vid == protocol.MLTE_VENDOR_ID
    assert protocol.split_vendor_payload(payload) == (protocol.CAPS_REQUEST, b"")


def test_caps_reply_parsed_by_os_ken_then_by_protocol():
    raw = of10.vendor(7, protocol.MLTE_VENDOR_ID, protocol.vendor_payload(protocol.CAPS_REPLY, CAPS.to_json().encode()))
    msg = of10.parse(raw)  # what an os-ken app receives in EventOFPVendor
    assert msg.msg_type == ofp.OFPT_VENDOR and protocol.is_caps_reply(msg)
    assert protocol.parse_caps_reply(msg) == CAPS
    assert protocol.parse_caps_reply(raw) == CAPS


def test_other_vendor_messages_are_not_caps_replies():
    other = of10.parse(of10.vendor(7, 0x2320, b"\x00\x00\x00\x02{}"))
    assert not protocol.is_caps_reply(other)
    with pytest.raises(protocol.CapabilitiesError):
        protocol.parse_caps_reply(other)
    req = of10.parse(of10.vendor(7, protocol.MLTE_VENDOR_ID, protocol.vendor_payload(protocol.CAPS_REQUEST)))
    assert not protocol.is_caps_reply(req)
    bad = of10.vendor(7, protocol.MLTE_VENDOR_ID, protocol.vendor_payload(protocol.CAPS_REPLY, b"{not json"))
    with pytest.raises(protocol.CapabilitiesError):
        protocol.parse_caps_reply(bad)


def test_port_names_and_granularity():
    assert port_name(3, "ODU2") == "ODU2-3"
    assert protocol.port_granularity(b"ODU2e-12\x00\x00") == "ODU2e"
    assert granularity_from_port_name("eth0") is None and granularity_from_port_name("ODU9-1") is None
    assert capacity_mbps("odu0", 1.0) == 1.25 and capacity_mbps("ODU4", 0.5) == 50.0


@pytest.mark.parametrize("mbps, bit", [
    (1.25, ofp.OFPPF_10MB_FD), (10, ofp.OFPPF_10MB_FD), (40, ofp.OFPPF_100MB_FD),
    (100, ofp.OFPPF_100MB_FD), (1250, ofp.OFPPF_1GB_FD), (10_000, ofp.OFPPF_10GB_FD), (100_000, ofp.OFPPF_10GB_FD),
])
def test_speed_bits_closest_on_log_scale(mbps, bit):
    assert speed_bits(mbps) == bit | ofp.OFPPF_FIBER


def test_parse_ports():
    assert parse_ports("1:ODU2, 2:odu2,0x6:ODU0") == {1: "ODU2", 2: "ODU2", 6: "ODU0"}
    for bad in ("", "1", "1:ODU9", "x:ODU2", "1:ODU2,1:ODU0", "0:ODU2", "65280:ODU2"):
        with pytest.raises(PortSpecError):
            parse_ports(bad)


def test_os_ken_error_handler_survives_of10_errors_after_patch():
    """Without the patch os-ken's own ofp_handler raises on any OF1.0 ERROR (and drops the switch)."""
    import logging
    import types

    from os_ken.controller import ofp_handler

    protocol.patch_os_ken_of10_errors()
    protocol.patch_os_ken_of10_errors()  # idempotent
    raw = of10.error(3, ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_OVERLAP, of10.barrier_reply(3))
    msg = of10.parse(raw)
    msg.datapath = types.SimpleNamespace(ofproto=ofp)
    fake_self = types.SimpleNamespace(logger=logging.getLogger("test"))
    ofp_handler.OFPHandler.error_msg_handler(fake_self, types.SimpleNamespace(msg=msg))
