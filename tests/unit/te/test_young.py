"""Young elephants (``[te] young_horizon_s``, app/te/young.py): a flow the offload gain turns down on
the few bytes its count rule has seen is moved in its first counts when two consecutive fine counts show
it at the elephant rate on a circuit that drops; a burst, a flow below the rate, a single count, a
circuit without drops, or the setting off leave it judged on its bytes (it waits, as before)."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from app.te.damping import Damper
from app.te.decisions import OFFLOAD, SKIP, OffloadDecider
from app.te.gain import offload_gain
from app.te.young import YoungElephants
from monitor.events import UNCONSTRAINED_IMBALANCE, Event
from tests.unit.te.test_decisions import live_graph
from topology.flow import FiveTuple

ELEPHANT = FiveTuple("10.0.0.1", "10.0.0.3", 6, 40000, 5001)
CONGESTED = "packet:A:3-B:1"
THRESHOLD = 1.0  # the monitor's elephant threshold (elephant_fraction 0.1 of 10 Mbit/s)


@dataclass
class Count:
    """A fine count as NetworkView.fine_flows holds it (monitor.flowstats.FlowCount's fields)."""

    bytes: int
    mbps: float
    t: float
    seconds: float


def event(mbps: float, drops: int = 40) -> Event:
    return Event(10.0, CONGESTED, UNCONSTRAINED_IMBALANCE, (ELEPHANT,),
                 {"elephant_mbps": [mbps], "util": 0.5, "drops": drops, "threshold_mbps": THRESHOLD})


def judge(d: OffloadDecider, count: Count, *, drops: int = 40, named: float | None = None):
    """One decision as the TE app takes it: the flow's latest count is its bytes and its evidence."""
    (dec,) = d.on_event(event(named if named is not None else count.mbps, drops), live_graph(), now=count.t,
                        loads_mbps={CONGESTED: 5.0}, flow_bytes=lambda f: float(count.bytes),
                        flow_count=lambda f: count)
    return dec


def young_decider(horizon: float = 3.0) -> OffloadDecider:
    return OffloadDecider(Damper(min_hold_s=30), young_horizon_s=horizon)


# A 3.4 Mbit/s elephant (held down on A-B-C; 10 Mbit/s on the new circuit), 0.3 s and 0.5 s into its
# count rule: 127 kB and 212 kB counted. On its bytes alone a move does not pay (predicted 0.1-0.2 MB
# to go: ~0.3-0.5 s where it is, more than that moved); at 3 s of its rate it pays.
FIRST = Count(127_500, 3.4, t=100.0, seconds=0.3)
SECOND = Count(212_500, 3.4, t=100.5, seconds=0.5)


def test_the_setting_off_changes_nothing_the_young_elephant_waits_on_its_bytes():
    d = young_decider(0.0)
    assert judge(d, FIRST).kind == SKIP
    dec = judge(d, SECOND)
    assert dec.kind == SKIP and "switch-over" in dec.reason
    assert "young" not in dec.detail["gain"][str(ELEPHANT)]


def test_two_counts_at_the_elephant_rate_move_it_in_its_first_half_second():
    d = young_decider(3.0)
    first = judge(d, FIRST)  # one count: no evidence yet, judged on its bytes
    assert first.kind == SKIP and "young" not in first.detail["gain"][str(ELEPHANT)]
    dec = judge(d, SECOND)
    assert dec.kind == OFFLOAD, dec.reason
    gain = dec.detail["gain"][str(ELEPHANT)]
    assert gain["young"] is True and gain["young_samples"] == [3.4, 3.4] and gain["young_mbps"] == 3.4
    # 3 s at 3.4 Mbit/s = 1.275 MB to go: 3.0 s where it is, 0.285 s switch-over + 1.02 s moved
    assert gain["remaining_bytes"] == 1_275_000
    assert gain["stay_s"] == pytest.approx(3.0, abs=1e-3) and gain["move_s"] == pytest.approx(1.305, abs=1e-3)
    assert gain["reason"].startswith("young elephant (2 counts at >= 3.40 Mbit/s")
    # on its bytes the same decision would not pay
    assert not offload_gain(SECOND.bytes, 3.4, 10.0, 0.285).pays


def test_the_same_count_twice_is_one_piece_of_evidence():
    d = young_decider(3.0)
    judge(d, FIRST)
    assert judge(d, FIRST).kind == SKIP  # the same reply again (judged on the same count): no news


def test_a_burst_in_one_count_and_then_below_the_elephant_rate_is_not_young():
    d = young_decider(3.0)
    judge(d, Count(300_000, 8.0, t=100.0, seconds=0.3))  # a burst fills the first count
    dec = judge(d, Count(310_000, 0.16, t=100.5, seconds=0.5), named=8.0)  # then it is a mouse
    assert dec.kind == SKIP and "young" not in dec.detail["gain"][str(ELEPHANT)]
    # the evidence starts again: one more count at the rate is not enough after a low one
    dec = judge(d, Count(400_000, 3.4, t=101.0, seconds=1.0), named=8.0)
    assert dec.kind == SKIP


def test_the_prediction_is_made_at_the_lower_count():
    """Damping: a first count at 9 Mbit/s and a second at 1.2 predict 3 s at 1.2 Mbit/s, which does not
    pay against the 9 Mbit/s the flow is judged to have where it is (the highest it showed)."""
    d = young_decider(3.0)
    judge(d, Count(300_000, 9.0, t=100.0, seconds=0.3))
    dec = judge(d, Count(375_000, 1.2, t=100.5, seconds=0.5), named=9.0)
    assert dec.kind == SKIP
    gain = dec.detail["gain"][str(ELEPHANT)]
    assert gain["young"] is True and gain["young_mbps"] == 1.2 and gain["pays"] is False


def test_no_drops_on_its_circuit_no_young_judgement():
    d = young_decider(3.0)
    judge(d, FIRST, drops=0)
    dec = judge(d, SECOND, drops=0)
    assert dec.kind == SKIP and "young" not in dec.detail["gain"][str(ELEPHANT)]


def test_a_short_horizon_still_has_to_pay():
    d = young_decider(1.0)  # 1 s more at 3.4 Mbit/s: 1.0 s where it is, 0.285 + 0.34 s moved: gain 0.37 s < 1 s
    judge(d, FIRST)
    dec = judge(d, SECOND)
    assert dec.kind == SKIP and dec.detail["gain"][str(ELEPHANT)]["young"] is True
    assert "gain 0.38 s < 1 s" in dec.detail["gain"][str(ELEPHANT)]["reason"]


def test_predict_guards():
    y = YoungElephants(2.0)
    y.note("f", 1.0, 5.0)
    assert y.predict("f", 1.0, 10) is None  # one count
    y.note("f", 1.5, 4.0)
    p = y.predict("f", 1.0, 10)
    assert p is not None and p.mbps == 4.0 and p.remaining_bytes == 4.0e6 / 8 * 2.0 and p.samples == (5.0, 4.0)
    assert y.predict("f", 0.0, 10) is None  # no threshold known
    assert y.predict("f", 4.5, 10) is None  # one count below the threshold
    assert y.predict("f", 1.0, 0) is None  # no drops
    y.note("f", 1.2, 9.0)  # an older reply than the last: no news
    assert y.predict("f", 1.0, 10).samples == (5.0, 4.0)
    y.forget("f")
    assert y.predict("f", 1.0, 10) is None
    off = YoungElephants(0.0)
    off.note("f", 1.0, 5.0)
    off.note("f", 2.0, 5.0)
    assert off.predict("f", 1.0, 10) is None
    with pytest.raises(ValueError, match="young_horizon_s"):
        YoungElephants(-1.0)
    with pytest.raises(ValueError, match="at least 2"):
        YoungElephants(1.0, min_samples=1)


def test_the_flows_kept_are_bounded():
    y = YoungElephants(2.0, max_flows=3)
    for i in range(5):
        y.note(i, 1.0, 5.0)
    assert sorted(y._counts) == [2, 3, 4]


def test_remaining_bytes_overrides_the_pareto_prediction_and_is_checked():
    g = offload_gain(0.0, 3.4, 10.0, 0.285, remaining_bytes=1_275_000)
    assert g.pays and g.remaining_bytes == 1_275_000
    with pytest.raises(ValueError, match="remaining bytes"):
        offload_gain(0.0, 3.4, 10.0, 0.285, remaining_bytes=-1.0)
