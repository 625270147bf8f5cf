"""Fine-monitoring manager (hot spots → switch actions) and the SQL store."""
from __future__ import annotations

import subprocess
import sys

from app.db.migrate import open_migrated
from monitor.events import (
    ELEPHANT_GONE,
    HOT_SPOT,
    HOT_SPOT_CLEARED,
    UNCONSTRAINED_IMBALANCE,
    Event,
)
from monitor.fine import DISABLE, ENABLE, FineAction, FineMonitorManager
from monitor.store import MonitorStore
from topology.flow import FiveTuple

CIRCUITS = {"A-B": ["A", "B"], "B-C": ["B", "C"], "A-C2": ["A", "C"]}
EL = FiveTuple("10.0.0.1", "10.0.0.3", 6, 40000, 5001)


def test_fine_on_only_for_circuit_switches_and_refcounted():
    m = FineMonitorManager(lambda c: CIRCUITS[c])
    assert m.on_event(Event(0, "A-B", HOT_SPOT)) == [FineAction(ENABLE, "A"), FineAction(ENABLE, "B")]
    assert m.on_event(Event(1, "B-C", HOT_SPOT)) == [FineAction(ENABLE, "C")]  # B already on
    assert m.enabled == {"A", "B", "C"}
    assert m.on_event(Event(2, "A-B", HOT_SPOT_CLEARED)) == [FineAction(DISABLE, "A")]  # B still needed
    assert m.on_event(Event(3, "B-C", HOT_SPOT_CLEARED)) == [FineAction(DISABLE, "B"), FineAction(DISABLE, "C")]
    assert m.enabled == set()


def test_elephants_keep_switches_on_until_gone_and_follow_offload():
    m = FineMonitorManager(lambda c: CIRCUITS[c])
    m.on_event(Event(0, "A-B", HOT_SPOT))
    m.on_event(Event(1, "A-B", UNCONSTRAINED_IMBALANCE, (EL,)))
    assert m.on_event(Event(2, "A-B", HOT_SPOT_CLEARED)) == []  # the elephant still holds A and B
    acts = m.move_flow(str(EL), ["A", "C"])  # offloaded to A-C2
    assert acts == [FineAction(ENABLE, "C"), FineAction(DISABLE, "B")]
    assert m.on_event(Event(9, "A-B", ELEPHANT_GONE, (EL,))) == [FineAction(DISABLE, "A"), FineAction(DISABLE, "C")]


def test_store_series_events_and_retention(tmp_path):
    st = MonitorStore(open_migrated(f"sqlite:///{tmp_path / 'm.db'}").engine, retention_seconds=10)
    st.add_samples([(float(t), "A:3", "util", t / 10) for t in range(20)])
    st.add_event(Event(5.0, "A-B", UNCONSTRAINED_IMBALANCE, (EL,), {"drops": 3}))
    st.add_event(Event(15.0, "A-B", HOT_SPOT_CLEARED))
    assert [p.value for p in st.series("A:3", "util", since=17)] == [1.7, 1.8, 1.9]
    (ev,) = st.events(kind=UNCONSTRAINED_IMBALANCE)
    assert ev["flows"] == [EL.as_dict()] and ev["detail"] == {"drops": 3}
    assert FiveTuple.from_dict(ev["flows"][0]) == EL
    assert st.prune(now=20.0) == 10 + 1
    assert len(st.series("A:3", "util")) == 10 and [e["kind"] for e in st.events()] == [HOT_SPOT_CLEARED]


def test_monitor_library_imports_no_os_ken_or_flask():
    code = ("import sys, monitor, monitor.sflow, monitor.counters, monitor.events, monitor.latency, "
            "monitor.load_estimators, monitor.store, monitor.fine, monitor.ovsdb_sflow, monitor.drops, "
            "monitor.sflow.sflow_rt; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('os_ken', 'flask', 'app')]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
