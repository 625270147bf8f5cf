"""A reservation's meter declares its burst (100 ms of the rate): without OFPMF_BURST userspace OVS lets a
whole second of the rate through at once, and a sharer of a groomed circuit sending far beyond its meter
took 4-8 % of the others' (tests/integration/test_grooming_lab.py measured it)."""
from __future__ import annotations

from os_ken.ofproto import ofproto_v1_3 as ofp13

from app.controller import ofmsg


def test_a_meter_declares_its_burst_as_a_tenth_of_a_second_of_its_rate() -> None:
    msg = ofmsg.meter_mod(7, 3000, "add")
    assert msg.flags & ofp13.OFPMF_BURST and msg.flags & ofp13.OFPMF_KBPS
    (band,) = msg.bands
    assert (band.rate, band.burst_size) == (3000, 300)


def test_a_slow_meter_still_passes_a_few_whole_frames_at_once() -> None:
    assert ofmsg.meter_mod(1, 64, "modify").bands[0].burst_size == 48  # four 1,500-byte frames
    assert ofmsg.meter_burst_kbit(100_000) == 10_000


def test_a_deleted_meter_has_no_band() -> None:
    assert ofmsg.meter_mod(3, None, "delete").bands == []
