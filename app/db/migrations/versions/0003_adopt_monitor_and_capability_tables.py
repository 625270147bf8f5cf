"""Adopt the monitor's (mon_samples, mon_events) and the capability store's (cap_nodes) tables.

Before this revision ``monitor/store.py`` and ``topology/capabilities.py`` created their tables
themselves (``create_all``), so a database may already have them, with exactly these columns and
indexes: they are created only where missing. From here on these migrations are their only owner.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25 10:00:00
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

#: table -> [(index name, columns)] as the modules' create_all made them
INDEXES = {
    "mon_samples": [("ix_mon_samples_t", ["t"]), ("ix_mon_samples_point_metric_t", ["point", "metric", "t"])],
    "mon_events": [("ix_mon_events_t", ["t"]), ("ix_mon_events_circuit", ["circuit"]),
                   ("ix_mon_events_kind", ["kind"])],
    "cap_nodes": [],
}


def _columns(table: str) -> list[sa.Column]:
    if table == "mon_samples":
        return [sa.Column('id', sa.Integer(), nullable=False),
                sa.Column('t', sa.Float(), nullable=False),
                sa.Column('point', sa.String(length=128), nullable=False),
                sa.Column('metric', sa.String(length=64), nullable=False),
                sa.Column('value', sa.Float(), nullable=False),
                sa.PrimaryKeyConstraint('id')]
    if table == "mon_events":
        return [sa.Column('id', sa.Integer(), nullable=False),
                sa.Column('t', sa.Float(), nullable=False),
                sa.Column('circuit', sa.String(length=128), nullable=False),
                sa.Column('kind', sa.String(length=64), nullable=False),
                sa.Column('flows', sa.Text(), nullable=False),
                sa.Column('detail', sa.Text(), nullable=False),
                sa.PrimaryKeyConstraint('id')]
    return [sa.Column('dpid', sa.String(length=16), nullable=False),
            sa.Column('name', sa.String(length=64), nullable=True),
            sa.Column('switch_type', sa.String(length=16), nullable=False),
            sa.Column('switching_time', sa.Float(), nullable=False),
            sa.Column('one_rule_per_port', sa.Boolean(), nullable=False),
            sa.Column('flow_table_capacity', sa.Integer(), nullable=True),
            sa.Column('vlan_restrictions', sa.JSON(), nullable=True),
            sa.Column('match_fields', sa.JSON(), nullable=True),
            sa.Column('granularity', sa.JSON(), nullable=False),
            sa.Column('setup_time_min', sa.Float(), nullable=True),
            sa.Column('setup_time_max', sa.Float(), nullable=True),
            sa.Column('updated_at', sa.Float(), nullable=False),
            sa.PrimaryKeyConstraint('dpid')]


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    existing = set(inspector.get_table_names())
    for table, indexes in INDEXES.items():
        have: set[str] = set()
        if table in existing:
            have = {ix["name"] for ix in inspector.get_indexes(table)}
        else:
            op.create_table(table, *_columns(table))
        for name, cols in indexes:
            if name not in have:
                op.create_index(name, table, cols, unique=False)


def downgrade() -> None:
    """Nothing: before 0003 these tables existed too (their modules made them), and they hold the
    monitor's series and the node capabilities."""
