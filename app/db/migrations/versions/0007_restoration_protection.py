"""Failures (docs/failures.md): reservations.protection ("none" | "1+1") and the restorations table.

A reservation broken by a failure goes ACTIVE → RESTORING → ACTIVE (or DEGRADED); each repair is one
``restorations`` row with its cause, times and old → new path. New states need no schema change
(``reservations.state`` is a string).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28 00:10:00
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a plain ADD COLUMN (no batch copy on SQLite: other tables' foreign keys point at reservations)
    op.add_column('reservations', sa.Column('protection', sa.String(length=8), nullable=False,
                                            server_default='none'))
    op.create_table(
        'restorations',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('reservation_id', sa.Integer(), nullable=False),
        sa.Column('cause', sa.Text(), nullable=False),
        sa.Column('detected_ts', sa.Float(), nullable=False),
        sa.Column('started_ts', sa.Float(), nullable=False),
        sa.Column('finished_ts', sa.Float(), nullable=True),
        sa.Column('outcome', sa.String(length=16), nullable=False),
        sa.Column('reason', sa.Text(), nullable=False),
        sa.Column('attempt', sa.Integer(), nullable=False),
        sa.Column('old_path', sa.JSON(), nullable=False),
        sa.Column('new_path', sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(['reservation_id'], ['reservations.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index(op.f('ix_restorations_reservation_id'), 'restorations', ['reservation_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_restorations_reservation_id'), table_name='restorations')
    op.drop_table('restorations')
    if op.get_bind().dialect.name == "sqlite":  # SQLite >= 3.35 drops a column in place
        op.execute("ALTER TABLE reservations DROP COLUMN protection")
    else:
        op.drop_column('reservations', 'protection')
