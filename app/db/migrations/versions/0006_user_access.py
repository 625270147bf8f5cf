"""Users' access control: session epoch, disabled flag; API tokens' last use and expiry.

``users.session_epoch`` is copied into the login session and compared on every request, so raising
it (a new password, disabling the user) ends the user's logged-in sessions; ``users.disabled`` refuses
the login, the sessions and the tokens while keeping the user's reservations. ``api_tokens.last_used_at``
is recorded when a token authenticates (``mlte web user list`` shows it) and ``expires_at`` (null:
never) bounds a token's life.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27 22:00:00
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # plain ADD COLUMNs (no batch copy on SQLite: reservations and audit entries point at users)
    op.add_column('users', sa.Column('session_epoch', sa.Integer(), nullable=False, server_default='0'))
    op.add_column('users', sa.Column('disabled', sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column('api_tokens', sa.Column('last_used_at', sa.Float(), nullable=True))
    op.add_column('api_tokens', sa.Column('expires_at', sa.Float(), nullable=True))


def downgrade() -> None:
    for table, column in (('api_tokens', 'expires_at'), ('api_tokens', 'last_used_at'),
                          ('users', 'disabled'), ('users', 'session_epoch')):
        if op.get_bind().dialect.name == "sqlite":  # SQLite >= 3.35 drops a column in place
            op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        else:
            op.drop_column(table, column)
