"""reservations.provisioned_bw: the bandwidth an elastic reservation is given now (its meter's rate).

An elastic reservation is admitted for its whole bandwidth (the grant) but provisioned one unit at a
time as its demand grows (docs/te-loop.md, "Elastic reservations"); the controller records the
current value here so the API shows it. Null for static reservations and before the controller lit it.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 10:00:00
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a plain ADD COLUMN (no batch copy on SQLite: other tables' foreign keys point at reservations)
    op.add_column('reservations', sa.Column('provisioned_bw', sa.Float(), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":  # SQLite >= 3.35 drops a column in place
        op.execute("ALTER TABLE reservations DROP COLUMN provisioned_bw")
    else:
        op.drop_column('reservations', 'provisioned_bw')
