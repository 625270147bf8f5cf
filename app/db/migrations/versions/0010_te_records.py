"""The TE loop's records in the shared database (issue 24): the ``te_records`` table.

Every offload and grown circuit of the TE loop is a record (``app.te.takeover.TeRecord``) written
before its plan runs and removed once its release is done. With ``[db] url`` set the controllers keep
them here (``app.te.store.DbTeStore``), so a new leader on another host adopts what the old one lit
instead of releasing it as an orphan. Key: (kind, ident); the writer's epoch fences stale writes.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28 04:40:00
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'te_records',
        sa.Column('kind', sa.String(length=16), nullable=False),
        sa.Column('ident', sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column('body', sa.JSON(), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('since', sa.Float(), nullable=False),
        sa.Column('threshold_mbps', sa.Float(), nullable=False),
        sa.Column('epoch', sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint('kind', 'ident'),
    )


def downgrade() -> None:
    op.drop_table('te_records')
