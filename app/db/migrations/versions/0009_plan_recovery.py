"""Plan records for takeover (issue 24): a running plan is stored with its leader's epoch and step states.

Several controllers share the ``plans`` table; the leader's plan runner now writes a row when a plan
starts (``state`` ``running``, ``finished_at`` NULL) with the executor's plan id (``uid``), the epoch of
the leader that runs it (``epoch``; NULL for a single controller, which does not write these rows),
who asked (``source``, ``owner``), the plan itself (``body``) and each step's state as it completes
(``step_states``); a new leader that finds the row still running claims it (``claimed_epoch``), finishes
or rolls the plan back and marks the claim done (``claim_done``), so it is handled exactly once.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28 04:45:00
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('plans') as batch:
        batch.add_column(sa.Column('uid', sa.String(length=64), nullable=True))
        batch.add_column(sa.Column('epoch', sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column('source', sa.String(length=32), nullable=True))
        batch.add_column(sa.Column('owner', sa.String(length=128), nullable=True))
        batch.add_column(sa.Column('body', sa.JSON(), nullable=True))
        batch.add_column(sa.Column('step_states', sa.JSON(), nullable=True))
        batch.add_column(sa.Column('claimed_epoch', sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column('claim_done', sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.alter_column('finished_at', existing_type=sa.Float(), nullable=True)
        batch.create_index('ix_plans_uid', ['uid'], unique=True)
        batch.create_index('ix_plans_state', ['state'])


def downgrade() -> None:
    op.execute("DELETE FROM plans WHERE finished_at IS NULL")  # running records: no place in 0008
    with op.batch_alter_table('plans') as batch:
        batch.drop_index('ix_plans_state')
        batch.drop_index('ix_plans_uid')
        batch.alter_column('finished_at', existing_type=sa.Float(), nullable=False)
        for col in ('claim_done', 'claimed_epoch', 'step_states', 'body', 'owner', 'source', 'epoch', 'uid'):
            batch.drop_column(col)
