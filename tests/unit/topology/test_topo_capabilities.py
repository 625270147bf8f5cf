"""Capability store: CRUD on SQLite (file and memory), validation, the OTS report mapping."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, inspect

from app.db.migrate import open_migrated
from topology.capabilities import CapabilityError, CapabilityStore, NodeCapabilities

OTS = NodeCapabilities(dpid=0x0F01, name="X", switch_type="optical", switching_time=0.185, one_rule_per_port=True,
                       flow_table_capacity=6, vlan_restrictions="no-vlan-match", match_fields=["in_port"],
                       granularity={1: "ODU2", 6: "odu0"}, setup_time_min=0.15, setup_time_max=0.22)
PKT = NodeCapabilities(dpid=0xA1, name="A", switch_type="packet", switching_time=1e-12, flow_table_capacity=1000,
                       vlan_restrictions=[[1, 4094]])


@pytest.fixture
def memory_store() -> Iterator[CapabilityStore]:
    """An in-memory database, migrated as an entry point does, holding the store."""
    db = open_migrated("sqlite://")
    yield CapabilityStore(db.engine)
    db.dispose()


def test_crud_on_sqlite_file(tmp_path):
    url = f"sqlite:///{tmp_path / 'caps.db'}"
    db = open_migrated(url)
    stored = CapabilityStore(db.engine).upsert(OTS, now=100.0)
    assert stored.granularity == {1: "ODU2", 6: "ODU0"} and stored.updated_at == 100.0
    CapabilityStore(db.engine).upsert(PKT, now=101.0)
    db.dispose()
    db = open_migrated(url)
    store = CapabilityStore(db.engine)  # persisted
    assert store.get(0x0F01) == stored
    assert [c.dpid for c in store.list()] == [0xA1, 0x0F01]
    assert [c.name for c in store.list("optical")] == ["X"]
    assert [c.name for c in store.list("ots")] == ["X"]  # the OTS's own word for its type
    # upsert replaces
    store.upsert(NodeCapabilities(dpid=0xA1, switch_type="packet", switching_time=2e-12, name="A2"), now=102.0)
    again = store.get(0xA1)
    assert again.name == "A2" and again.switching_time == 2e-12 and again.flow_table_capacity is None
    assert len(store.list()) == 2
    assert store.delete(0xA1) is True and store.delete(0xA1) is False
    assert store.get(0xA1) is None
    tables = inspect(create_engine(url)).get_table_names()
    assert "cap_nodes" in tables and "alembic_version" in tables  # made by mlte's migrations, not the store
    db.dispose()


def test_full_64_bit_dpid_in_memory_store(memory_store: CapabilityStore):
    store = memory_store
    big = NodeCapabilities(dpid=2**64 - 1, switch_type="packet", switching_time=0.0)
    store.upsert(big)
    assert store.get(2**64 - 1).dpid == 2**64 - 1
    assert store.get(5) is None


@pytest.mark.parametrize("bad, message", [
    (dict(switch_type="router"), "switch_type must be one of"),
    (dict(switching_time=-1), "switching_time must be >= 0"),
    (dict(flow_table_capacity=-3), "flow_table_capacity"),
    (dict(setup_time_min=0.3, setup_time_max=0.2), "setup_time_min <= setup_time_max"),
    (dict(setup_time_min=0.3, setup_time_max=None), "both or neither"),
    (dict(granularity={1: "ODU9"}), "port 1: unknown granularity"),
    (dict(vlan_restrictions=[[10, 5]]), "VLAN ranges"),
    (dict(dpid=-1), "dpid must be an integer"),
])
def test_validation(bad, message, memory_store: CapabilityStore):
    store = memory_store
    fields = dict(dpid=1, switch_type="optical", switching_time=0.1)
    fields.update(bad)
    with pytest.raises(CapabilityError, match=message) as info:
        store.upsert(NodeCapabilities(**fields))
    assert info.value.user_error is True
    assert store.list() == []


def test_packet_switch_has_no_port_granularity():
    with pytest.raises(CapabilityError, match="only optical"):
        NodeCapabilities(dpid=1, switch_type="packet", switching_time=0, granularity={1: "ODU2"}).validated()


def test_from_ots_report():
    report = {"dpid": 3841, "name": "X", "switch_type": "ots", "unit_mbps": 1.0, "setup_time_min": 0.15,
              "setup_time_max": 0.22, "one_rule_per_port": True, "table_capacity": 6, "match_fields": ["in_port"],
              "actions": ["output"], "vlan_restrictions": "no-vlan-match",
              "ports": {"1": {"granularity": "ODU2", "capacity_units": 10.0, "capacity_mbps": 10.0},
                        "6": {"granularity": "ODU0", "capacity_units": 1.25, "capacity_mbps": 1.25}}}
    caps = NodeCapabilities.from_ots_report(report)
    assert caps.switch_type == "optical" and caps.granularity == {1: "ODU2", 6: "ODU0"}
    assert caps.flow_table_capacity == 6 and caps.one_rule_per_port is True
    assert caps.switching_time == pytest.approx(0.185)
    with pytest.raises(CapabilityError, match="bad OTS capabilities report"):
        NodeCapabilities.from_ots_report({"dpid": 1})

