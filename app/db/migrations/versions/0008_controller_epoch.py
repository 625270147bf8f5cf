"""Database fencing (issue 24): the one-row ``controller_epoch`` table.

Several controllers share one database; the leader elected through etcd has a monotonic ``epoch``.
It raises the stored epoch to its own when it takes over (``app.db.fencing.claim``), and every write
of a fenced controller checks, in its own transaction, that no newer epoch is stored
(``app.db.fencing.check``), so a deposed or frozen leader that wakes up cannot change anything.
The row starts at epoch 0 (no leader yet); one controller without etcd never reads it.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28 03:40:00
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'controller_epoch',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('epoch', sa.BigInteger(), nullable=False),
        sa.Column('holder', sa.Text(), nullable=False),
        sa.Column('since', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    row = sa.table("controller_epoch", sa.column("id", sa.Integer()), sa.column("epoch", sa.BigInteger()),
                   sa.column("holder", sa.Text()), sa.column("since", sa.Float()))
    op.bulk_insert(row, [{"id": 1, "epoch": 0, "holder": "", "since": 0.0}])  # the row fenced writes lock


def downgrade() -> None:
    op.drop_table('controller_epoch')
