"""Provisioning: reservation_rules and plans; ACTIVE without anything installed becomes PROVISIONING.

Before this revision ACTIVE only meant "the window has started". Now ACTIVE means the controller has
lit the reservation (its circuits and packet rules are recorded) and PROVISIONING is the state in
between, so a running reservation that has no circuit recorded for it waits for the controller again
(one audit entry each says so).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25 10:30:00
"""
from __future__ import annotations

import time

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

REASON = "start time reached; waiting for the controller to light it (schema 0004: ACTIVE now means lit)"

_reservations = sa.table("reservations", sa.column("id", sa.Integer()), sa.column("state", sa.String()),
                         sa.column("state_reason", sa.Text()), sa.column("updated_ts", sa.Float()))
_circuits = sa.table("circuits", sa.column("reservation_id", sa.Integer()))
_audit = sa.table("audit_log", sa.column("ts", sa.Float()), sa.column("user_id", sa.Integer()),
                  sa.column("action", sa.String()), sa.column("entity", sa.String()),
                  sa.column("entity_id", sa.Integer()), sa.column("detail", sa.JSON()))


def upgrade() -> None:
    op.create_table('plans',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('mode', sa.String(length=16), nullable=False),
    sa.Column('reservation_id', sa.Integer(), nullable=True),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('started_at', sa.Float(), nullable=False),
    sa.Column('finished_at', sa.Float(), nullable=False),
    sa.Column('steps', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['reservation_id'], ['reservations.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_plans_reservation_id', 'plans', ['reservation_id'], unique=False)
    op.create_table('reservation_rules',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('reservation_id', sa.Integer(), nullable=False),
    sa.Column('switch', sa.String(length=64), nullable=False),
    sa.Column('table_id', sa.Integer(), nullable=False),
    sa.Column('priority', sa.Integer(), nullable=False),
    sa.Column('cookie', sa.String(length=16), nullable=False),
    sa.Column('match', sa.JSON(), nullable=False),
    sa.Column('actions', sa.JSON(), nullable=False),
    sa.Column('installed', sa.Boolean(), nullable=False),
    sa.Column('installed_ts', sa.Float(), nullable=False),
    sa.Column('removed_ts', sa.Float(), nullable=True),
    sa.ForeignKeyConstraint(['reservation_id'], ['reservations.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_reservation_rules_reservation_id', 'reservation_rules', ['reservation_id'], unique=False)
    op.create_index('ix_reservation_rules_installed', 'reservation_rules', ['installed'], unique=False)

    bind = op.get_bind()
    lit = sa.select(_circuits.c.reservation_id).where(_circuits.c.reservation_id.is_not(None))
    ids = list(bind.execute(sa.select(_reservations.c.id).where(_reservations.c.state == "ACTIVE",
                                                                 _reservations.c.id.not_in(lit))).scalars())
    if ids:
        now = time.time()
        bind.execute(_reservations.update().where(_reservations.c.id.in_(ids))
                     .values(state="PROVISIONING", state_reason=REASON, updated_ts=now))
        op.bulk_insert(_audit, [{"ts": now, "user_id": None, "action": "transition", "entity": "reservation",
                                 "entity_id": i, "detail": {"from": "ACTIVE", "to": "PROVISIONING",
                                                            "reason": REASON}} for i in ids])


def downgrade() -> None:
    """Back to the four-state life cycle: PROVISIONING becomes ACTIVE again (the window has started)."""
    op.execute(_reservations.update().where(_reservations.c.state == "PROVISIONING").values(state="ACTIVE"))
    op.drop_index('ix_reservation_rules_installed', table_name='reservation_rules')
    op.drop_index('ix_reservation_rules_reservation_id', table_name='reservation_rules')
    op.drop_table('reservation_rules')
    op.drop_index('ix_plans_reservation_id', table_name='plans')
    op.drop_table('plans')
