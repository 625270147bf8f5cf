"""Drop link_samples: utilization series live in the monitor's mon_samples (one source of truth).

The controller's monitor app writes per-circuit samples through ``monitor.store.MonitorStore``
(bounded retention); the web service reads them via ``app/web/monitor_read.py``.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 01:30:00
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('link_samples', schema=None) as batch_op:
        batch_op.drop_index('ix_link_samples_link_ts')
    op.drop_table('link_samples')


def downgrade() -> None:
    op.create_table('link_samples',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('ts', sa.Float(), nullable=False),
    sa.Column('link', sa.String(length=128), nullable=False),
    sa.Column('mbps', sa.Float(), nullable=False),
    sa.Column('utilization', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('link_samples', schema=None) as batch_op:
        batch_op.create_index('ix_link_samples_link_ts', ['link', 'ts'], unique=False)
