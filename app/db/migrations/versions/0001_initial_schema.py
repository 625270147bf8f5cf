"""Initial schema: users, tokens, reservations, circuits, XCONs, audit log, samples, events.

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-22 00:43:34.208509
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('admission_lock',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('counter', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    lock = sa.table("admission_lock", sa.column("id", sa.Integer()), sa.column("counter", sa.Integer()))
    op.bulk_insert(lock, [{"id": 1, "counter": 0}])  # the row admission transactions lock
    op.create_table('events',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('ts', sa.Float(), nullable=False),
    sa.Column('kind', sa.String(length=64), nullable=False),
    sa.Column('severity', sa.String(length=16), nullable=False),
    sa.Column('message', sa.Text(), nullable=False),
    sa.Column('detail', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_events_ts'), ['ts'], unique=False)

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

    op.create_table('topology_snapshots',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('ts', sa.Float(), nullable=False),
    sa.Column('graph', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('topology_snapshots', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_topology_snapshots_ts'), ['ts'], unique=False)

    op.create_table('users',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('password_hash', sa.String(length=256), nullable=True),
    sa.Column('is_admin', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name')
    )
    op.create_table('api_tokens',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('label', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('token_hash')
    )
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_api_tokens_user_id'), ['user_id'], unique=False)

    op.create_table('audit_log',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('ts', sa.Float(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=True),
    sa.Column('action', sa.String(length=32), nullable=False),
    sa.Column('entity', sa.String(length=32), nullable=False),
    sa.Column('entity_id', sa.Integer(), nullable=True),
    sa.Column('detail', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_audit_log_ts'), ['ts'], unique=False)

    op.create_table('reservations',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('src', sa.String(length=64), nullable=False),
    sa.Column('src_vlan', sa.Integer(), nullable=True),
    sa.Column('dst', sa.String(length=64), nullable=False),
    sa.Column('dst_vlan', sa.Integer(), nullable=True),
    sa.Column('bandwidth', sa.Float(), nullable=False),
    sa.Column('start_ts', sa.Float(), nullable=False),
    sa.Column('end_ts', sa.Float(), nullable=False),
    sa.Column('mode', sa.String(length=16), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('state_reason', sa.Text(), nullable=False),
    sa.Column('ero', sa.JSON(), nullable=True),
    sa.Column('path', sa.JSON(), nullable=True),
    sa.Column('owner_id', sa.Integer(), nullable=False),
    sa.Column('hold_expires_ts', sa.Float(), nullable=True),
    sa.Column('created_ts', sa.Float(), nullable=False),
    sa.Column('updated_ts', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['owner_id'], ['users.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('reservations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_reservations_owner_id'), ['owner_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_reservations_state'), ['state'], unique=False)
        batch_op.create_index('ix_reservations_window', ['start_ts', 'end_ts'], unique=False)

    op.create_table('circuits',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('reservation_id', sa.Integer(), nullable=True),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('a_end', sa.String(length=64), nullable=False),
    sa.Column('z_end', sa.String(length=64), nullable=False),
    sa.Column('capacity', sa.Float(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('created_ts', sa.Float(), nullable=False),
    sa.Column('updated_ts', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['reservation_id'], ['reservations.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('circuits', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_circuits_reservation_id'), ['reservation_id'], unique=False)

    op.create_table('xcons',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('circuit_id', sa.Integer(), nullable=False),
    sa.Column('ots', sa.String(length=64), nullable=False),
    sa.Column('in_port', sa.Integer(), nullable=False),
    sa.Column('out_port', sa.Integer(), nullable=False),
    sa.Column('active', sa.Boolean(), nullable=False),
    sa.ForeignKeyConstraint(['circuit_id'], ['circuits.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('xcons', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_xcons_circuit_id'), ['circuit_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('xcons', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_xcons_circuit_id'))

    op.drop_table('xcons')
    with op.batch_alter_table('circuits', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_circuits_reservation_id'))

    op.drop_table('circuits')
    with op.batch_alter_table('reservations', schema=None) as batch_op:
        batch_op.drop_index('ix_reservations_window')
        batch_op.drop_index(batch_op.f('ix_reservations_state'))
        batch_op.drop_index(batch_op.f('ix_reservations_owner_id'))

    op.drop_table('reservations')
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_audit_log_ts'))

    op.drop_table('audit_log')
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_tokens_user_id'))

    op.drop_table('api_tokens')
    op.drop_table('users')
    with op.batch_alter_table('topology_snapshots', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_topology_snapshots_ts'))

    op.drop_table('topology_snapshots')
    with op.batch_alter_table('link_samples', schema=None) as batch_op:
        batch_op.drop_index('ix_link_samples_link_ts')

    op.drop_table('link_samples')
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_events_ts'))

    op.drop_table('events')
    op.drop_table('admission_lock')
